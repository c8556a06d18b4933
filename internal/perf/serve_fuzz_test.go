package perf

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/internal/daemontest"
)

// The server's side of the control protocol is untrusted input: anyone who
// reaches its port may send it anything. FuzzServe drives the whole of it
// (Serve, serveConn, session, test, drive) against a real daemon with a
// client's byte stream, and checks what must hold whatever the client says:
// the server does not panic, ends the connection within its bounds, tells
// the client why when it gives up on it, releases every verbs object and
// goroutine it made for it, logs only printable lines, and serves the next
// client.

// hangGuard bounds every wait of these tests: what they check is that the
// wait ends at all, never how soon.
const hangGuard = time.Minute

// serveRig is a daemon with the server's instance, an admin connection that
// counts the daemon's objects, and the configuration each served client
// gets.
type serveRig struct {
	adm *vrdma.Admin
	cfg ServerConfig
}

// newServeRig starts a daemon with the instances "srv" (the server's) and
// "cli" (a real client's, for recording seeds). The server's bounds are
// short, so that a client which stops talking costs an input little.
func newServeRig(tb testing.TB) *serveRig {
	tb.Helper()
	sock := daemontest.Start(tb)
	adm, err := vrdma.DialAdmin(vrdma.Options{Socket: sock})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { adm.Close() })
	for _, n := range []string{"srv", "cli"} {
		if _, err := adm.CreateInstance(vrdma.InstanceSpec{Name: n, Adapters: 1}); err != nil {
			tb.Fatal(err)
		}
	}
	return &serveRig{adm: adm, cfg: ServerConfig{
		Local:    vrdma.Options{Socket: sock, Instance: "srv", Client: "perf fuzz"},
		GIDIndex: AutoGID, Timeout: 300 * time.Millisecond, Idle: 300 * time.Millisecond, MaxClients: 2,
		MaxMemory: 16 << 20, RunSlack: 50 * time.Millisecond,
	}}
}

// served is a Serve running on a loopback port for one input.
type served struct {
	addr   string
	errLog *syncBuffer
	ends   chan error // each client's session's end, as serveConn reports it
	stop   context.CancelFunc
	done   chan error // Serve's return
}

// serve starts Serve with the rig's configuration; wrap, if not nil, wraps
// each connection the server accepts.
func (r *serveRig) serve(tb testing.TB, wrap func(net.Conn) net.Conn) *served {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	s := &served{addr: ln.Addr().String(), errLog: &syncBuffer{}, ends: make(chan error, 16), done: make(chan error, 1)}
	cfg := r.cfg
	cfg.ErrLog = s.errLog
	cfg.served = func(_ net.Addr, err error) { s.ends <- err }
	var l net.Listener = ln
	if wrap != nil {
		l = wrapListener{ln, wrap}
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	go func() { s.done <- Serve(ctx, l, cfg) }()
	return s
}

// end waits for the next client's session to end and returns its error.
func (s *served) end(tb testing.TB, what string) error {
	tb.Helper()
	select {
	case err := <-s.ends:
		return err
	case <-time.After(hangGuard):
		daemontest.DumpGoroutines(tb)
		tb.Fatalf("%s: the server has not ended the connection after %v", what, hangGuard)
	}
	panic("unreachable")
}

// close ends Serve and checks that it returned nil.
func (s *served) close(tb testing.TB) {
	tb.Helper()
	s.stop()
	select {
	case err := <-s.done:
		if err != nil {
			tb.Errorf("Serve = %v after its context ended; want nil", err)
		}
	case <-time.After(hangGuard):
		daemontest.DumpGoroutines(tb)
		tb.Fatalf("Serve has not returned %v after its context ended", hangGuard)
	}
}

type wrapListener struct {
	net.Listener
	wrap func(net.Conn) net.Conn
}

func (l wrapListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return l.wrap(c), nil
}

// recordingConn keeps what the server read: the client's stream.
type recordingConn struct {
	net.Conn
	mu  *sync.Mutex
	buf *bytes.Buffer
}

func (c recordingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	c.buf.Write(p[:n])
	c.mu.Unlock()
	return n, err
}

// record runs real clients against a server and returns what each client
// sent: for each list of tests, one connection that runs them in turn.
func (r *serveRig) record(tb testing.TB, sessions [][]string) [][]byte {
	tb.Helper()
	var (
		mu   sync.Mutex
		bufs []*bytes.Buffer
	)
	rec := *r
	rec.cfg.RunSlack, rec.cfg.Timeout, rec.cfg.Idle = 0, 0, 0 // real clients on a busy machine: the defaults
	s := rec.serve(tb, func(c net.Conn) net.Conn {
		mu.Lock()
		defer mu.Unlock()
		b := &bytes.Buffer{}
		bufs = append(bufs, b)
		return recordingConn{c, &mu, b}
	})
	defer s.close(tb)
	for _, names := range sessions {
		c, err := Dial(context.Background(), ClientConfig{Server: s.addr, Local: vrdma.Options{Socket: r.cfg.Local.Socket, Instance: "cli"},
			GIDIndex: AutoGID, Duration: time.Millisecond})
		if err != nil {
			tb.Fatal(err)
		}
		for _, n := range names {
			if _, err := c.Run(context.Background(), n); err != nil {
				tb.Fatalf("recording %s: %v", n, err)
			}
		}
		c.Close()
		if err := s.end(tb, "recording"); err != nil {
			tb.Fatalf("recording %v: the server ended the session with %v", names, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	out := make([][]byte, len(bufs))
	for i, b := range bufs {
		out[i] = bytes.Clone(b.Bytes())
	}
	return out
}

// fuzzEP is a client's end that no QP has: where a hand-written seed's
// setup points the server.
const fuzzEP = `"ep":{"qpn":17,"psn":1,"gid":"fe800000000000000000000000000001","rkey":1,"addr":4096,"len":1048576}`

func FuzzServe(f *testing.F) {
	r := newServeRig(f)
	for _, rec := range r.record(f, [][]string{
		{"rc_lat"}, {"rc_bw"}, {"rc_bi_bw"}, {"uc_bw"}, {"ud_lat"}, {"ud_bw"}, {"rc_rdma_write_lat"},
		{"rc_rdma_read_lat"}, {"rc_rdma_write_bw"}, {"rc_compare_swap_mr"}, {"rc_lat", "rc_rdma_read_bw", "rc_fetch_add_mr"},
	}) {
		f.Add(rec, false)
		f.Add(rec, true)
		if i := bytes.LastIndex(rec, []byte(`{"type":"end"}`)); i >= 0 {
			f.Add(rec[:i], false) // a client that never says "end"
		}
		if i := bytes.LastIndex(rec, []byte(`{"type":"start"}`)); i >= 0 {
			f.Add(rec[:i+5], true) // one that leaves in the middle of a line
		}
	}
	setup := func(test string, size int, ns int64) string {
		return fmt.Sprintf(`{"type":"setup","test":%q,"size":%d,"time_ns":%d,%s}`+"\n", test, size, ns, fuzzEP)
	}
	for _, s := range []string{
		goodHello,
		goodHello + goodHello,
		goodHello + setup("rc_bw", 4096, 1e6) + `{"type":"start"}` + "\n" + `{"type":"end"}` + "\n",
		goodHello + setup("rc_lat", 1, 1e6) + `{"type":"start"}` + "\n" + `{"type":"start"}` + "\n",
		goodHello + setup("rc_rdma_read_bw", 4096, 1e6) + setup("rc_bw", 4096, 1e6),
		goodHello + setup("rc_bi_bw", 1<<31, 1e6),
		goodHello + setup("ud_lat", 1<<20, int64(time.Hour)) + `{"type":"start"}` + "\n",
		goodHello + `{"type":"error","error":"no\n\u001b[31mclient 10.0.0.1: forged line"}` + "\n",
		goodHello + `{"type":"result","tally":{"ops":1,"bytes":1,"ns":1}}` + "\n",
		strings.Repeat("x", 3*maxMsg),
		`{"type":"hello","proto":"vrdma-perf","version":2}` + "\n",
		`{"type":"hel`,
		"",
	} {
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, stream []byte, hangup bool) {
		r.check(t, stream, hangup)
	})
}

// check serves one client that sends stream and then closes the connection
// (hangup) or only its sending half, reading what the server says.
func (r *serveRig) check(t *testing.T, stream []byte, hangup bool) {
	before := r.stats(t)
	goroutines := runtime.NumGoroutine()
	s := r.serve(t, nil)
	conn, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(hangGuard))
	said := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(conn)
		said <- b
	}()
	_, _ = conn.Write(stream) // the server may have given up on it already
	if hangup {
		conn.Close()
	} else {
		_ = conn.(*net.TCPConn).CloseWrite()
	}
	err = s.end(t, "the client")
	out := <-said
	if !hangup {
		checkServerSaid(t, out, err)
	}

	// The server serves the next client.
	c, err := Dial(context.Background(), ClientConfig{Server: s.addr, Timeout: hangGuard})
	if err != nil {
		t.Fatalf("the next client: %v", err)
	}
	c.Close()
	s.end(t, "the next client")
	s.close(t)
	checkPrintable(t, s.errLog.String())
	r.released(t, before, goroutines)
}

// checkServerSaid checks the server's messages to a client that read them
// all: whole messages, in the protocol's order, and an error message last
// exactly when the server gave up on the client (sessionErr).
func checkServerSaid(t *testing.T, out []byte, sessionErr error) {
	t.Helper()
	var prev string
	for len(out) > 0 {
		line, rest, ok := bytes.Cut(out, []byte("\n"))
		if !ok {
			t.Fatalf("the server's output ends in a partial line %q", line)
		}
		out = rest
		if len(line)+1 > maxMsg {
			t.Fatalf("the server sent a line of %d bytes, over the protocol's %d", len(line)+1, maxMsg)
		}
		m, err := parseMessage(line)
		if err != nil {
			t.Fatalf("the server sent %q: %v", line, err)
		}
		switch {
		case prev == msgError:
			t.Fatalf("the server sent %q after its error message", line)
		case m.Type == msgHello && prev == "",
			m.Type == msgReady && (prev == msgHello || prev == msgResult),
			m.Type == msgResult && prev == msgReady,
			m.Type == msgError:
		default:
			t.Fatalf("the server sent %q after a %q message", line, prev)
		}
		prev = m.Type
	}
	var pe *PeerError
	switch {
	case errors.As(sessionErr, &pe): // the client gave up first, and said why
	case sessionErr != nil && prev != msgError:
		t.Fatalf("the server gave up on the client (%v) without telling it (its last message: %q)", sessionErr, prev)
	case sessionErr == nil && prev == msgError:
		t.Fatal("the server sent an error message, and then says the session ended well")
	}
}

// checkPrintable checks that every line of a log is printable text: a
// client's words must not make lines of their own, or terminal escapes.
func checkPrintable(t *testing.T, log string) {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if i := strings.IndexFunc(sc.Text(), func(r rune) bool { return !unicode.IsPrint(r) }); i >= 0 {
			t.Fatalf("the server logged a line with %q at byte %d: %q", sc.Text()[i:], i, sc.Text())
		}
	}
}

func (r *serveRig) stats(t *testing.T) vrdma.DaemonStats {
	t.Helper()
	// The rig holds one session, the admin's; a recording's or the previous
	// input's client may still be ending.
	daemontest.AwaitSessions(t, func() (int, error) { st, err := r.adm.Stats(); return st.Sessions, err }, 1, hangGuard)
	st, err := r.adm.Stats()
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// released waits until the daemon holds what it held before and the
// goroutines are as many as before.
func (r *serveRig) released(t *testing.T, before vrdma.DaemonStats, goroutines int) {
	t.Helper()
	daemontest.AwaitReleased(t, r.adm.Stats, before, goroutines, hangGuard)
}
