package perf

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/internal/daemontest"
)

// syncBuffer is a bytes.Buffer several goroutines may write.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// rig is a daemon with an instance for each end and a perf server on
// 127.0.0.1 for the "srv" one.
type rig struct {
	server string // host:port
	client vrdma.Options
	errLog *syncBuffer
}

func startRig(t *testing.T, cfg ServerConfig) *rig {
	t.Helper()
	sock := daemontest.Start(t)
	adm, err := vrdma.DialAdmin(vrdma.Options{Socket: sock})
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	for _, n := range []string{"srv", "cli"} {
		if _, err := adm.CreateInstance(vrdma.InstanceSpec{Name: n, Adapters: 1}); err != nil {
			t.Fatal(err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{server: ln.Addr().String(), client: vrdma.Options{Socket: sock, Instance: "cli"}, errLog: &syncBuffer{}}
	cfg.Local = vrdma.Options{Socket: sock, Instance: "srv"}
	cfg.ErrLog = r.errLog
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- Serve(ctx, ln, cfg) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve = %v after its context ended; want nil", err)
		}
	})
	return r
}

func (r *rig) config(d time.Duration) ClientConfig {
	return ClientConfig{Server: r.server, Local: r.client, GIDIndex: AutoGID, MsgSize: 4096, Duration: d}
}

// within fails the test if f has not returned after a minute: what is
// tested is that it returns at all.
func within[T any](t *testing.T, f func() (T, error)) (T, error) {
	t.Helper()
	type out struct {
		v   T
		err error
	}
	ch := make(chan out, 1)
	go func() { v, err := f(); ch <- out{v, err} }()
	select {
	case o := <-ch:
		return o.v, o.err
	case <-time.After(time.Minute):
		t.Fatal("hung")
	}
	panic("unreachable")
}

func TestSplitRunsEveryTest(t *testing.T) {
	r := startRig(t, ServerConfig{GIDIndex: AutoGID})
	ctx := context.Background()
	c, err := Dial(ctx, r.config(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { c.Close() }()
	if c.Remote().Node == "" || c.Remote().Version == "" {
		t.Errorf("the server's conf is empty: %+v", c.Remote())
	}
	for _, name := range TestNames() {
		if name == "conf" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			res, err := within(t, func() (Result, error) { return c.Run(ctx, name) })
			if err != nil {
				t.Error(err)
				if c, err = Dial(ctx, r.config(200*time.Millisecond)); err != nil { // the failure closed it
					t.Fatal(err)
				}
				return
			}
			if res.Test != name || res.Server != r.server || res.MsgSize <= 0 || res.Messages == 0 || res.MsgRate <= 0 || res.Seconds <= 0 {
				t.Errorf("result lacks its name, server, size, messages, rate or time: %+v", res)
			}
			switch {
			case strings.HasSuffix(name, "_bw") && res.BW <= 0:
				t.Errorf("no bandwidth: %+v", res)
			case strings.HasSuffix(name, "_lat") && res.LatencyUS <= 0:
				t.Errorf("no latency: %+v", res)
			case strings.HasSuffix(name, "_mr") && res.MsgSize != 8:
				t.Errorf("an atomic of %d bytes, want 8: %+v", res.MsgSize, res)
			}
			var text bytes.Buffer
			res.WriteText(&text, true)
			t.Log("\n" + text.String())
			if res.CPU <= 0 {
				t.Errorf("no CPU load of the client: %+v", res)
			}
		})
	}
	if log := r.errLog.String(); log != "" {
		t.Errorf("the server logged errors:\n%s", log)
	}
}

// fakeServer listens on 127.0.0.1 and hands each connection to serve,
// with a channel that closes when the test ends.
func fakeServer(t *testing.T, serve func(net.Conn, <-chan struct{})) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	quit := make(chan struct{})
	t.Cleanup(func() { close(quit); ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				serve(conn, quit)
			}()
		}
	}()
	return ln.Addr().String()
}

func TestClientFacingANonPerfServerFailsClearly(t *testing.T) {
	write := func(s string) func(net.Conn, <-chan struct{}) {
		return func(c net.Conn, quit <-chan struct{}) {
			c.Write([]byte(s))
			<-quit // and stay connected
		}
	}
	tests := []struct {
		name  string
		serve func(net.Conn, <-chan struct{})
		want  []string
	}{
		{"ssh banner", write("SSH-2.0-OpenSSH_9.6\r\n"), []string{"is not a vrdma perf message", "SSH-2.0", "vrdma perf"}},
		{"http", func(c net.Conn, _ <-chan struct{}) {
			c.Read(make([]byte, 512))
			c.Write([]byte("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"))
		}, []string{"HTTP/1.1 400", "is not a vrdma perf message"}},
		{"json of another kind", write(`{"jsonrpc":"2.0","id":1}` + "\n"), []string{"unknown type"}},
		{"silent", func(_ net.Conn, quit <-chan struct{}) { <-quit }, []string{`sent no "hello" in`}},
		{"closes at once", func(net.Conn, <-chan struct{}) {}, []string{`closed the connection where "hello" was due`}},
		{"half a line", write(`{"type":"hel`), []string{"and then nothing"}},
		{"flood", write(strings.Repeat("x", 64<<10)), []string{"without a newline"}},
		{"newer version", write(`{"type":"hello","proto":"vrdma-perf","version":99}` + "\n"), []string{"version 99", "same vrdma release"}},
		{"busy", write(`{"type":"error","error":"the server is busy"}` + "\n"), []string{"the server at", "busy"}},
		{"no server", nil, []string{"connecting to", "refused"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var addr string
			if tt.serve != nil {
				addr = fakeServer(t, tt.serve)
			} else {
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				addr = ln.Addr().String()
				ln.Close()
			}
			cfg := ClientConfig{Server: addr, Timeout: 300 * time.Millisecond}
			_, err := within(t, func() (*Client, error) { return Dial(context.Background(), cfg) })
			if err == nil {
				t.Fatal("Dial succeeded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// rawClient speaks the control protocol by hand.
type rawClient struct {
	t    *testing.T
	conn net.Conn
	c    *ctl
}

func dialRaw(t *testing.T, addr string) *rawClient {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &rawClient{t: t, conn: conn, c: newCtl(conn, "the server at "+conn.RemoteAddr().String())}
}

func (r *rawClient) say(line string) {
	r.t.Helper()
	if _, err := r.conn.Write([]byte(line)); err != nil {
		r.t.Fatal(err)
	}
}

const goodHello = `{"type":"hello","proto":"vrdma-perf","version":1}` + "\n"

func TestServerTellsABadClientWhatIsWrong(t *testing.T) {
	r := startRig(t, ServerConfig{GIDIndex: AutoGID, Timeout: 2 * time.Second})
	ep := `"ep":{"qpn":17,"psn":1,"gid":"fe800000000000000000000000000001","rkey":1,"addr":0,"len":0}`
	tests := []struct {
		name  string
		lines []string // sent one after another; the last gets the error
		want  string
	}{
		{"http", []string{"GET / HTTP/1.0\r\n\r\n"}, "is not a vrdma perf message"},
		{"other version", []string{`{"type":"hello","proto":"vrdma-perf","version":2}` + "\n"}, "version 2"},
		{"setup before hello", []string{`{"type":"setup"}` + "\n"}, "unknown test"},
		{"start before hello", []string{`{"type":"start"}` + "\n"}, `where "hello" was due`},
		{"long line", []string{strings.Repeat("{", maxMsg+10)}, "without a newline"},
		{"unknown test", []string{goodHello, `{"type":"setup","test":"rc_nope","size":1,"time_ns":1000,` + ep + "}\n"}, `unknown test "rc_nope"`},
		{"size 0", []string{goodHello, `{"type":"setup","test":"rc_bw","size":0,"time_ns":1000,` + ep + "}\n"}, "message size 0"},
		{"a day", []string{goodHello, `{"type":"setup","test":"rc_bw","size":1,"time_ns":86400000000000,` + ep + "}\n"}, "at most 1h0m0s"},
		{"bad gid", []string{goodHello, `{"type":"setup","test":"rc_bw","size":1,"time_ns":1000,"ep":{"qpn":1,"gid":"zz"}}` + "\n"}, "32 hex digits"},
		{"region too small", []string{goodHello, `{"type":"setup","test":"rc_bw","size":4096,"time_ns":1000,` + ep + "}\n"}, "region has 0 bytes"},
		{"end before setup", []string{goodHello, `{"type":"end"}` + "\n"}, `where "setup" was due`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc := dialRaw(t, r.server)
			for i, l := range tt.lines {
				rc.say(l)
				if i < len(tt.lines)-1 {
					if _, err := rc.c.recv(5*time.Second, msgHello); err != nil {
						t.Fatal(err)
					}
				}
			}
			_, err := rc.c.recv(5*time.Second, msgHello, msgReady)
			var pe *PeerError
			if !errors.As(err, &pe) || !strings.Contains(pe.Text, tt.want) {
				t.Fatalf("server answered %v; want an error message with %q", err, tt.want)
			}
			if _, err := rc.c.recv(5*time.Second, msgHello); !errors.Is(err, io.EOF) {
				t.Errorf("after its error the server sent %v; want it to close the connection", err)
			}
		})
	}
	// and it still serves
	c, err := Dial(context.Background(), r.config(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Run(context.Background(), "rc_lat"); err != nil {
		t.Fatal(err)
	}
}

func TestServerSurvivesAClientLeavingMidTest(t *testing.T) {
	opened := make(chan string, 16)
	r := startRig(t, ServerConfig{GIDIndex: AutoGID, opened: func(test string) { opened <- test }})
	for _, name := range []string{"rc_bw", "rc_bi_bw", "ud_bw", "rc_lat", "ud_lat", "rc_rdma_write_lat", "rc_rdma_read_bw"} {
		t.Run(name, func(t *testing.T) {
			// Each subtest waits for a line of its own, so one that fails
			// does not fail the ones after it.
			logged := len(r.errLog.String())
			c, err := Dial(context.Background(), r.config(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			// Cut the client short once the server serves its test (its
			// end is open), however slow the machine.
			ctx, cancel := context.WithCancel(context.Background())
			serving := make(chan struct{})
			go func() {
				defer close(serving)
				defer cancel()
				select {
				case got := <-opened:
					if got != name {
						t.Errorf("the server opened %s, want %s", got, name)
					}
				case <-time.After(time.Minute): // a hang guard
					t.Error("the server did not open its end of the test in a minute")
				}
			}()
			_, err = within(t, func() (Result, error) { return c.Run(ctx, name) })
			<-serving
			if err == nil || !strings.Contains(err.Error(), "interrupted") {
				t.Fatalf("Run cut short = %v; want it interrupted", err)
			}
			// The server notices at once (not after the test's minute) and logs it.
			for n := 0; !strings.Contains(r.errLog.String()[logged:], "\n"); n++ {
				if n == 600 {
					t.Fatalf("the server has not noticed the client went away; its log:\n%s", r.errLog)
				}
				time.Sleep(50 * time.Millisecond)
			}
			if log := r.errLog.String()[logged:]; !strings.Contains(log, ": "+name+": ") {
				t.Errorf("the server's log does not say which test lost its client:\n%s", log)
			}
			c2, err := Dial(context.Background(), r.config(100*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			defer c2.Close()
			if _, err := within(t, func() (Result, error) { return c2.Run(context.Background(), name) }); err != nil {
				t.Fatalf("the next client: %v", err)
			}
			if got := <-opened; got != name { // the next client's test
				t.Errorf("the server opened %s for the next client, want %s", got, name)
			}
		})
	}
}

func TestServerTurnsAwayClientsBeyondItsLimit(t *testing.T) {
	r := startRig(t, ServerConfig{GIDIndex: AutoGID, MaxClients: 1})
	c, err := Dial(context.Background(), r.config(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Dial(context.Background(), r.config(100*time.Millisecond))
	if err == nil || !strings.Contains(err.Error(), "as many clients as it may (1)") {
		t.Fatalf("second client: %v; want the server busy", err)
	}
	c.Close()
	for n := 0; ; n++ { // its slot frees once the server sees it gone
		c, err = Dial(context.Background(), r.config(100*time.Millisecond))
		if err == nil {
			break
		}
		if n == 200 {
			t.Fatalf("the server stays busy after its client left: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	defer c.Close()
	if _, err := c.Run(context.Background(), "rc_rdma_read_lat"); err != nil {
		t.Fatal(err)
	}
}

func TestClientReportsTheServersFailure(t *testing.T) {
	r := startRig(t, ServerConfig{GIDIndex: AutoGID, Device: "vrdma7"})
	c, err := Dial(context.Background(), r.config(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = within(t, func() (Result, error) { return c.Run(context.Background(), "rc_lat") })
	var pe *PeerError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "the server could not open its end") || !strings.Contains(err.Error(), "vrdma7") {
		t.Fatalf("Run = %v; want the server's error, naming its device", err)
	}
	if _, err := c.Run(context.Background(), "rc_lat"); err == nil || !strings.Contains(err.Error(), "failed before") {
		t.Errorf("Run after a failure = %v; want it refused", err)
	}
}

// TestSlotFreeWhenTheClientSeesTheEnd: a client the server told of its
// error and disconnected may connect again at once, even while the server
// is still finishing with the last connection: its slot is given back as
// the connection closes, not after (TestServerTellsABadClientWhatIsWrong's
// subtests were refused as "serving as many clients as it may" under load).
func TestSlotFreeWhenTheClientSeesTheEnd(t *testing.T) {
	finishing := make(chan struct{}, 2)
	release := make(chan struct{})
	defer close(release)
	cfg := ServerConfig{GIDIndex: AutoGID, Timeout: 2 * time.Second, MaxClients: 1}
	cfg.served = func(net.Addr, error) {
		finishing <- struct{}{}
		<-release // the server still finishing with the connection
	}
	r := startRig(t, cfg)
	first := dialRaw(t, r.server)
	first.say(`{"type":"start"}` + "\n")
	if _, err := first.c.recv(5*time.Second, msgHello); err == nil {
		t.Fatal("the server answered a start before hello")
	}
	if _, err := first.c.recv(5*time.Second, msgHello); !errors.Is(err, io.EOF) {
		t.Fatalf("after its error the server sent %v; want it to close the connection", err)
	}
	<-finishing
	second := dialRaw(t, r.server)
	second.say(goodHello)
	if _, err := second.c.recv(5*time.Second, msgHello); err != nil {
		t.Fatalf("a client connecting again once its last connection ended: %v; want the server's hello", err)
	}
}

// A client cancelled once its test runs leaves without saying "end", so
// the server does not take the test for finished (and the client's leaving
// for the clean one between tests) but logs which test lost its client.
func TestServerLogsAClientCancelledWhileItsTestRuns(t *testing.T) {
	started := make(chan string, 1)
	r := startRig(t, ServerConfig{GIDIndex: AutoGID, started: func(test string) { started <- test }})
	for _, name := range []string{"rc_bw", "rc_bi_bw", "ud_bw", "rc_lat", "ud_lat", "rc_rdma_write_lat", "rc_rdma_read_bw"} {
		t.Run(name, func(t *testing.T) {
			// Each subtest waits for a line of its own, so one that fails
			// does not fail the ones after it.
			logged := len(r.errLog.String())
			c, err := Dial(context.Background(), r.config(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx, cancel := context.WithCancel(context.Background())
			go func() {
				defer cancel()
				select {
				case <-started:
				case <-time.After(time.Minute): // a hang guard
					t.Error("the server did not start the test in a minute")
				}
			}()
			_, err = within(t, func() (Result, error) { return c.Run(ctx, name) })
			if err == nil || !strings.Contains(err.Error(), "interrupted") {
				t.Fatalf("Run cut short = %v; want it interrupted", err)
			}
			for n := 0; !strings.Contains(r.errLog.String()[logged:], "\n"); n++ {
				if n == 600 {
					t.Fatalf("the server has not noticed the client went away; its log:\n%s", r.errLog)
				}
				time.Sleep(50 * time.Millisecond)
			}
			lines := strings.Split(strings.TrimSpace(r.errLog.String()), "\n")
			if last := lines[len(lines)-1]; !strings.Contains(last, ": "+name+": ") {
				t.Errorf("the server's log line = %q; want it to say %s lost its client", last, name)
			}
		})
	}
}
