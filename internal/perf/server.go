package perf

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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

	// MaxMemory is how many bytes of registered memory the server lends
	// the tests it serves at once, all clients together (a test of
	// messages of n bytes needs a region of about 2n); 0: 1 GiB. A test
	// that needs more is refused, and told why.
	MaxMemory int64
	// RunSlack is how much longer than the time it asked for a client's
	// test may take, and how long the server waits for its end of a test
	// to finish once the client has said "end"; then the server gives up
	// on the client. 0: 30 s.
	RunSlack time.Duration

	// served, if set, is told how each client's session ended, once the
	// server is done with it: its connection closed and the line logged.
	served func(remote net.Addr, err error)
	// opened, if set, is told the test's name once the server has opened
	// its end of it (before it answers "ready").
	opened func(test string)
	// started, if set, is told the test's name once the client has said
	// "start" (before the server's end runs it).
	started func(test string)
}

func (c *ServerConfig) timeout() time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	return defaultTimeout
}

func (c *ServerConfig) runSlack() time.Duration {
	if c.RunSlack > 0 {
		return c.RunSlack
	}
	return runSlack
}

// defaultMaxMemory is ServerConfig.MaxMemory's default.
const defaultMaxMemory = 1 << 30

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
	if cfg.MaxMemory <= 0 {
		cfg.MaxMemory = defaultMaxMemory
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
				sc := &slotConn{Conn: conn, free: func() { <-slots }}
				defer sc.freeSlot()
				s.serveConn(ctx, sc)
			}()
		default:
			go func() {
				defer wg.Done()
				newCtl(conn, "the client").fail(fmt.Errorf("the server is serving as many clients as it may (%d): try again when one is done", cfg.MaxClients), cfg.timeout())
			}()
		}
	}
}

// slotConn is a served client's connection that gives its slot back when
// it is closed, before the client can see it end: a client told of an
// error and disconnected may connect again at once, and is not refused
// for a slot its last connection still held while the server finished
// with it.
type slotConn struct {
	net.Conn
	free func()
	once sync.Once
}

func (c *slotConn) freeSlot() { c.once.Do(c.free) }

func (c *slotConn) Close() error {
	c.freeSlot()
	return c.Conn.Close()
}

type server struct {
	cfg ServerConfig
	mu  sync.Mutex // serializes the logs

	lentMu sync.Mutex
	lent   int64 // bytes of registered memory the tests being served hold
}

// lend takes n bytes of the memory the server lends its tests, or says
// why it cannot; give them back with giveBack.
func (s *server) lend(n int64, size int) error {
	s.lentMu.Lock()
	defer s.lentMu.Unlock()
	switch {
	case n > s.cfg.MaxMemory:
		return fmt.Errorf("messages of %s need %s of registered memory on the server, more than it lends a test (%s): ask for smaller messages (-m)",
			sizeText(size), bytesText(n), bytesText(s.cfg.MaxMemory))
	case s.lent+n > s.cfg.MaxMemory:
		return fmt.Errorf("messages of %s need %s of registered memory on the server, and its other clients' tests hold %s of the %s it lends: try again when they are done, or ask for smaller messages (-m)",
			sizeText(size), bytesText(n), bytesText(s.lent), bytesText(s.cfg.MaxMemory))
	}
	s.lent += n
	return nil
}

func (s *server) giveBack(n int64) {
	s.lentMu.Lock()
	s.lent -= n
	s.lentMu.Unlock()
}

// bytesText is n bytes in binary units, to a tenth of the unit.
func bytesText(n int64) string {
	for _, u := range []struct {
		shift uint
		name  string
	}{{30, "GiB"}, {20, "MiB"}, {10, "KiB"}} {
		if n >= 1<<u.shift {
			v := strconv.FormatFloat(float64(n)/float64(int64(1)<<u.shift), 'f', 1, 64)
			return strings.TrimSuffix(v, ".0") + " " + u.name
		}
	}
	return fmt.Sprintf("%d bytes", n)
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
	err := s.session(ctx, c)
	if err != nil && ctx.Err() == nil {
		s.errorf("client %s: %v", conn.RemoteAddr(), err)
	}
	if s.cfg.served != nil {
		conn.Close()
		s.cfg.served(conn.RemoteAddr(), err)
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
	res, err := s.run(ctx, c, m)
	if err != nil {
		return err
	}
	if err := c.send(res, s.cfg.timeout()); err != nil {
		c.fail(err, s.cfg.timeout())
		return err
	}
	s.logf("client %s: %s, messages of %s for %v: served", c.conn.RemoteAddr(), m.Test, sizeText(m.Size), time.Duration(m.TimeNS))
	return nil
}

// run plays the server's end of the test m sets up and returns its result
// message. Its memory and verbs objects are released when it returns, so
// that a client that has its result may start another test at once, on
// this connection or another. On an error it has told the client, as far
// as it could, and closed the connection.
func (s *server) run(ctx context.Context, c *ctl, m message) (*message, error) {
	to := s.cfg.timeout()
	fail := func(err error) (*message, error) { c.fail(err, to); return nil, err }
	t := tests[m.Test] // parseMessage has checked the name
	need := int64(regionSize(m.Size))
	if err := s.lend(need, m.Size); err != nil {
		return fail(err)
	}
	defer s.giveBack(need)
	side, err := openSide(s.cfg.Local, s.cfg.Device, t.typ, m.Size, false)
	if err != nil {
		return fail(fmt.Errorf("the server could not open its end: %w", err))
	}
	defer side.close()
	if s.cfg.opened != nil {
		s.cfg.opened(m.Test)
	}
	gid := s.cfg.GIDIndex
	if gid < 0 {
		gid = pickGID(side.dev.Info().GIDs, localIP(c.conn))
	}
	me, err := side.self(gid)
	if err != nil {
		return fail(fmt.Errorf("the server's end: %w", err))
	}
	e := &end{side: side, peer: m.EP.peer(), size: m.Size, d: time.Duration(m.TimeNS), pin: -1}
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
	if s.cfg.started != nil {
		s.cfg.started(m.Test)
	}
	pas, cpu, err := s.drive(ctx, c, t, e)
	if err != nil {
		return nil, err // drive has told the client
	}
	return &message{Type: msgResult, Tally: &pas, CPU: cpu}, nil
}

// drive runs t's passive role on e while a goroutine waits for the
// client's "end", and returns the role's tally and this end's CPU load.
// If the client goes away or the role fails, the other is cut short; so
// is the role if the client has not said "end" by the test's time and the
// server's slack, or the role has not finished within the slack after it.
func (s *server) drive(ctx context.Context, c *ctl, t *test, e *end) (tally, float64, error) {
	slack := s.cfg.runSlack()
	ctx, g := newGroup(ctx)
	var ended atomic.Bool
	bound := time.AfterFunc(e.d+slack, func() {
		if ended.Load() {
			g.fail(fmt.Errorf("the server's end of the test did not finish within %v of the client's \"end\": did the client's end stop taking part?", slack))
			return
		}
		g.fail(fmt.Errorf("the client did not end the test within %v of its %v: the server gave up on it", slack, e.d))
	})
	defer bound.Stop()
	peerDone := make(chan struct{})
	g.run(func() error {
		defer close(peerDone)
		// bound ends the test first; the read's own deadline only backs it up.
		if _, err := c.recv(e.d+slack+s.cfg.timeout(), msgEnd); err != nil {
			return err
		}
		ended.Store(true)
		bound.Reset(slack)
		return nil
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
