package perf

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/vrdma/vrdma"
)

// DefaultPort is the TCP port a perf server listens on, qperf's.
const DefaultPort = 19765

const (
	defaultTimeout = 10 * time.Second // a control message outside a test's run
	// runSlack is how much longer than its time a test may take before
	// its ends give up on each other.
	runSlack = 30 * time.Second
)

// ClientConfig is a perf client: the server it measures with and its own
// end of each test.
type ClientConfig struct {
	Server   string        // host:port of a `vrdma perf` server
	Local    vrdma.Options // this end's daemon and instance
	Device   string        // this end's adapter; "" for the instance's first
	GIDIndex int           // this end's GID; AutoGID picks it (see pickGID)
	MsgSize  int           // 0: qperf's default for each test (64 KiB for bandwidth, 1 byte for latency)
	Duration time.Duration // per test; 0: 2 s, qperf's default
	Timeout  time.Duration // for each control message outside a test's run; 0: 10 s
}

func (c *ClientConfig) timeout() time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	return defaultTimeout
}

func (c *ClientConfig) duration() time.Duration {
	if c.Duration > 0 {
		return c.Duration
	}
	return 2 * time.Second
}

// Client is a control connection to a perf server, over which it runs
// tests one after another. After an error the connection is closed:
// Dial again.
type Client struct {
	cfg    ClientConfig
	c      *ctl
	remote Conf
	broken error
}

// Dial connects to cfg.Server and greets it.
func Dial(ctx context.Context, cfg ClientConfig) (*Client, error) {
	d := net.Dialer{Timeout: cfg.timeout()}
	conn, err := d.DialContext(ctx, "tcp", cfg.Server)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w: is a perf server (`vrdma perf` without a test) running there, on that port?", cfg.Server, err)
	}
	c := &Client{cfg: cfg, c: newCtl(conn, "the server at "+conn.RemoteAddr().String())}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	if err := c.hello(); err != nil {
		conn.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	return c, nil
}

func (c *Client) hello() error {
	conf := LocalConf()
	if err := c.c.send(&message{Type: msgHello, Proto: protoName, Version: protoVersion, Conf: &conf}, c.cfg.timeout()); err != nil {
		return err
	}
	m, err := c.c.recv(c.cfg.timeout(), msgHello)
	var pe *PeerError
	switch {
	case errors.As(err, &pe):
		return err
	case err != nil:
		return fmt.Errorf("%w: is it a vrdma perf server? Start one there with `vrdma perf` (no test), and give its port if it is not %d", err, DefaultPort)
	case m.Version != protoVersion:
		return fmt.Errorf("%s speaks version %d of vrdma perf's protocol, this client %d: run the same vrdma release on both hosts", c.c.who, m.Version, protoVersion)
	}
	if m.Conf != nil {
		c.remote = *m.Conf
	}
	return nil
}

// Remote describes the server's host, for qperf's conf test.
func (c *Client) Remote() Conf { return c.remote }

// Close closes the control connection; the server then waits for its
// next client.
func (c *Client) Close() error { return c.c.conn.Close() }

// Run runs one test with the server. Cancelling ctx closes the connection
// at once, in the middle of a test too.
func (c *Client) Run(ctx context.Context, name string) (Result, error) {
	if c.broken != nil {
		return Result{}, fmt.Errorf("%s: the connection to the server failed before: %w", name, c.broken)
	}
	t, ok := tests[name]
	if !ok {
		return Result{}, unknownTest(name)
	}
	stop := context.AfterFunc(ctx, func() { c.c.conn.Close() })
	defer stop()
	r, err := c.run(ctx, name, t)
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("interrupted: %w", ctx.Err())
		}
		c.broken = err
		c.c.conn.Close()
		return Result{}, fmt.Errorf("%s: %w", name, err)
	}
	return r, nil
}

func (c *Client) run(ctx context.Context, name string, t *test) (Result, error) {
	size := t.size(sizeFor(name, c.cfg.MsgSize))
	d := c.cfg.duration()
	s, err := openSide(c.cfg.Local, c.cfg.Device, t.typ, size, false)
	if err != nil {
		return Result{}, fmt.Errorf("opening this end: %w", err)
	}
	defer s.close()
	gid := c.cfg.GIDIndex
	if gid < 0 {
		gid = pickGID(s.dev.Info().GIDs, localIP(c.c.conn))
	}
	me, err := s.self(gid)
	if err != nil {
		return Result{}, err
	}
	if err := c.c.send(&message{Type: msgSetup, Test: name, Size: size, TimeNS: int64(d), EP: toWire(me)}, c.cfg.timeout()); err != nil {
		return Result{}, err
	}
	m, err := c.c.recv(c.cfg.timeout(), msgReady)
	if err != nil {
		return Result{}, err
	}
	e := &end{side: s, peer: m.EP.peer(), size: size, d: d, pin: -1}
	if err := e.peer.fits(size); err != nil {
		return Result{}, fmt.Errorf("the server's end: %w", err)
	}
	if err := s.connect(e.peer, gid); err != nil {
		return Result{}, err
	}
	if t.prepare != nil {
		if err := t.prepare(e); err != nil {
			return Result{}, err
		}
	}
	if err := c.c.send(&message{Type: msgStart}, c.cfg.timeout()); err != nil {
		return Result{}, err
	}
	act, rem, cpu, err := c.drive(ctx, t, e)
	if err != nil {
		return Result{}, err
	}
	r := t.result(size, act, *rem.Tally)
	r.Test, r.CPU, r.RemCPU, r.Server = name, cpu, rem.CPU, c.cfg.Server
	r.Async = s.dev.Info().Async
	r.Path, _ = s.qp.Path()
	return r, nil
}

// drive runs t's active role on e while a goroutine waits for the
// server's result; the role's done sends "end". It returns the role's
// tally, the server's result and this end's CPU load.
func (c *Client) drive(ctx context.Context, t *test, e *end) (act tally, rem message, cpu float64, err error) {
	run := ctx // Run's: once it is cancelled, the role ends without "end"
	ctx, cancel := context.WithTimeout(ctx, e.d+runSlack)
	defer cancel()
	ctx, g := newGroup(ctx)
	peerDone := make(chan struct{})
	g.run(func() error {
		defer close(peerDone)
		var err error
		rem, err = c.c.recv(e.d+2*runSlack, msgResult)
		if errors.Is(err, io.EOF) {
			err = fmt.Errorf("%w, in the middle of the test: the server was stopped or failed (its output says which)", err)
		}
		return err
	})
	var once sync.Once
	e.peerDone = peerDone
	e.done = func() {
		once.Do(func() {
			if err := run.Err(); err != nil {
				// Cut short, the client leaves at once (Run closes the
				// connection). "end" would tell the server the test ran
				// to its end, and it would take the closing for a client
				// leaving between tests.
				c.c.conn.Close()
				g.fail(err)
				return
			}
			g.fail(c.c.send(&message{Type: msgEnd}, c.cfg.timeout()))
		})
	}
	m := startMeter(e.dev)
	start := time.Now()
	act, aerr := t.active(ctx, e)
	e.done()
	cpu = m.stop(time.Since(start))
	g.fail(aerr)
	return act, rem, cpu, g.wait()
}
