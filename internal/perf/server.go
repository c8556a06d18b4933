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

// ServerConfig is a perf server: its end of every test it serves.
type ServerConfig struct {
	Local      vrdma.Options // this end's daemon and instance
	Device     string        // this end's adapter; "" for the instance's first
	GIDIndex   int           // this end's GID; AutoGID picks it per client (see pickGID)
	Timeout    time.Duration // for each control message outside a test's run; 0: 10 s
	Idle       time.Duration // how long a client may wait between tests; 0: 2 min
	MaxClients int           // clients served at once; 0: 4. Others are told to come back.
	Log        io.Writer     // a line per test served; nil: none
	ErrLog     io.Writer     // a line per client that failed; nil: none
}

func (c *ServerConfig) timeout() time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	return defaultTimeout
}

// Serve serves perf clients that connect to ln, each on its own goroutine,
// until ctx ends; then it closes ln, waits for the clients being served
// (their connections closed, their tests cut short) and returns nil.
func Serve(ctx context.Context, ln net.Listener, cfg ServerConfig) error {
	if cfg.Idle <= 0 {
		cfg.Idle = 2 * time.Minute
	}
	if cfg.MaxClients <= 0 {
		cfg.MaxClients = 4
	}
	s := &server{cfg: cfg}
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	slots := make(chan struct{}, cfg.MaxClients)
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			s.errorf("accepting a client: %v", err)
			time.Sleep(100 * time.Millisecond) // out of file descriptors, say: let some close
			continue
		}
		wg.Add(1)
		select {
		case slots <- struct{}{}:
			go func() {
				defer wg.Done()
				defer func() { <-slots }()
				s.serveConn(ctx, conn)
			}()
		default:
			go func() {
				defer wg.Done()
				newCtl(conn, "the client").fail(fmt.Errorf("the server is serving as many clients as it may (%d): try again when one is done", cfg.MaxClients), cfg.timeout())
			}()
		}
	}
}

type server struct {
	cfg ServerConfig
	mu  sync.Mutex // serializes the logs
}

func (s *server) errorf(format string, args ...any) { s.printf(s.cfg.ErrLog, format, args...) }
func (s *server) logf(format string, args ...any)   { s.printf(s.cfg.Log, format, args...) }

func (s *server) printf(w io.Writer, format string, args ...any) {
	if w == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(w, format+"\n", args...)
}

// serveConn serves one client until it closes the connection or fails.
func (s *server) serveConn(ctx context.Context, conn net.Conn) {
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	c := newCtl(conn, "the client")
	if err := s.session(ctx, c); err != nil && ctx.Err() == nil {
		s.errorf("client %s: %v", conn.RemoteAddr(), err)
	}
}

// session is the hello and then one test after another.
func (s *server) session(ctx context.Context, c *ctl) error {
	to := s.cfg.timeout()
	m, err := c.recv(to, msgHello)
	if err != nil {
		c.fail(err, to)
		return err
	}
	if m.Version != protoVersion {
		err := fmt.Errorf("the client speaks version %d of vrdma perf's protocol, this server %d: run the same vrdma release on both hosts", m.Version, protoVersion)
		c.fail(err, to)
		return err
	}
	conf := LocalConf()
	if err := c.send(&message{Type: msgHello, Proto: protoName, Version: protoVersion, Conf: &conf}, to); err != nil {
		return err
	}
	for {
		m, err := c.recv(s.cfg.Idle, msgSetup)
		if errors.Is(err, io.EOF) {
			return nil // the client is done
		}
		if err != nil {
			c.fail(err, to)
			return err
		}
		if err := s.test(ctx, c, m); err != nil {
			return fmt.Errorf("%s: %w", m.Test, err)
		}
	}
}

// test serves one test the client set up with m. On an error it has told
// the client, as far as it could, and closed the connection.
func (s *server) test(ctx context.Context, c *ctl, m message) error {
	to := s.cfg.timeout()
	fail := func(err error) error { c.fail(err, to); return err }
	t := tests[m.Test] // parseMessage has checked the name
	d := time.Duration(m.TimeNS)
	side, err := openSide(s.cfg.Local, s.cfg.Device, t.typ, m.Size)
	if err != nil {
		return fail(fmt.Errorf("the server could not open its end: %w", err))
	}
	defer side.close()
	gid := s.cfg.GIDIndex
	if gid < 0 {
		gid = pickGID(side.dev.Info().GIDs, localIP(c.conn))
	}
	me, err := side.self(gid)
	if err != nil {
		return fail(fmt.Errorf("the server's end: %w", err))
	}
	e := &end{side: side, peer: m.EP.peer(), size: m.Size, d: d, pin: -1}
	if err := e.peer.fits(m.Size); err != nil {
		return fail(fmt.Errorf("the client's end: %w", err))
	}
	if err := side.connect(e.peer, gid); err != nil {
		return fail(fmt.Errorf("the server's end: %w", err))
	}
	if t.prepare != nil {
		if err := t.prepare(e); err != nil {
			return fail(fmt.Errorf("the server's end: %w", err))
		}
	}
	if err := c.send(&message{Type: msgReady, EP: toWire(me)}, to); err != nil {
		return fail(err)
	}
	if _, err := c.recv(to, msgStart); err != nil {
		return fail(err)
	}
	pas, cpu, err := s.drive(ctx, c, t, e)
	if err != nil {
		return err // drive has told the client
	}
	if err := c.send(&message{Type: msgResult, Tally: &pas, CPU: cpu}, to); err != nil {
		return fail(err)
	}
	s.logf("client %s: %s, messages of %s for %v: served", c.conn.RemoteAddr(), m.Test, sizeText(m.Size), d)
	return nil
}

// drive runs t's passive role on e while a goroutine waits for the
// client's "end", and returns the role's tally and this end's CPU load.
// If the client goes away or the role fails, the other is cut short.
func (s *server) drive(ctx context.Context, c *ctl, t *test, e *end) (tally, float64, error) {
	ctx, cancel := context.WithTimeout(ctx, e.d+runSlack)
	defer cancel()
	ctx, g := newGroup(ctx)
	peerDone := make(chan struct{})
	g.run(func() error {
		defer close(peerDone)
		_, err := c.recv(e.d+2*runSlack, msgEnd)
		return err
	})
	e.peerDone, e.done = peerDone, func() {}
	m := startMeter(e.dev)
	start := time.Now()
	pas, err := t.passive(ctx, e)
	cpu := m.stop(time.Since(start))
	g.fail(err)
	if err := g.first(); err != nil {
		c.fail(err, s.cfg.timeout()) // tell the client now, and end the wait for its "end"
		g.wait()
		return pas, 0, err
	}
	if err := g.wait(); err != nil {
		c.fail(err, s.cfg.timeout())
		return pas, 0, err
	}
	return pas, cpu, nil
}
