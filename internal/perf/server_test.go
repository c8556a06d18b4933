package perf

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/vrdma/vrdma/ibv"
)

// setupLine is a setup for test with messages of size bytes for d, its
// end one that no QP has, with a region big enough for the messages.
func setupLine(test string, size int, d time.Duration) string {
	return fmt.Sprintf(`{"type":"setup","test":%q,"size":%d,"time_ns":%d,"ep":{"qpn":17,"psn":1,"gid":"fe800000000000000000000000000001","rkey":1,"addr":4096,"len":%d}}`+"\n",
		test, size, d, regionSize(size))
}

// start greets the server and sets up a test; it returns what the server
// answered the setup with.
func (r *rawClient) start(setup string) (message, error) {
	r.t.Helper()
	r.say(goodHello)
	if _, err := r.c.recv(hangGuard, msgHello); err != nil {
		r.t.Fatal(err)
	}
	r.say(setup)
	return r.c.recv(hangGuard, msgReady)
}

// finish runs a test the server is ready for: start, end, and its result.
func (r *rawClient) finish() {
	r.t.Helper()
	r.say(`{"type":"start"}` + "\n" + `{"type":"end"}` + "\n")
	if _, err := r.c.recv(hangGuard, msgResult); err != nil {
		r.t.Fatalf("the test's result: %v", err)
	}
}

// wantRefused checks that err is the server's error message, with want in
// it, and that the server closed the connection after it.
func (r *rawClient) wantRefused(err error, want string) {
	r.t.Helper()
	var pe *PeerError
	if !errors.As(err, &pe) || !strings.Contains(pe.Text, want) {
		r.t.Fatalf("the server answered %v; want an error message with %q", err, want)
	}
	if _, err := r.c.recv(hangGuard, msgHello); !errors.Is(err, io.EOF) {
		r.t.Errorf("after its error the server sent %v; want it to close the connection", err)
	}
}

func TestServerLendsItsTestsBoundedMemory(t *testing.T) {
	tests := []struct {
		name string
		max  int64 // ServerConfig.MaxMemory
		size int
		want string // in the error; "" for ready
	}{
		{"within what it lends", 1 << 20, 256 << 10, ""},
		{"over what it lends", 1 << 20, 1 << 20, "more than it lends a test (1 MiB)"},
		{"2 GiB messages, the default", 0, 1 << 31, "need 4 GiB of registered memory on the server, more than it lends a test (1 GiB)"},
		{"512 MiB messages, the default", 0, 512 << 20, "more than it lends a test (1 GiB)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := startRig(t, ServerConfig{GIDIndex: AutoGID, MaxMemory: tt.max})
			rc := dialRaw(t, r.server)
			_, err := rc.start(setupLine("rc_rdma_read_bw", tt.size, time.Millisecond))
			if tt.want != "" {
				rc.wantRefused(err, tt.want)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			rc.finish()
		})
	}
}

func TestServerLendsMemoryToAllItsClientsTogether(t *testing.T) {
	r := startRig(t, ServerConfig{GIDIndex: AutoGID, MaxMemory: 1 << 20})
	setup := setupLine("rc_rdma_read_bw", 300<<10, time.Millisecond)
	a := dialRaw(t, r.server)
	if _, err := a.start(setup); err != nil {
		t.Fatal(err)
	}
	b := dialRaw(t, r.server)
	_, err := b.start(setup)
	b.wantRefused(err, "its other clients' tests hold 600.1 KiB of the 1 MiB it lends")
	a.finish()
	a.conn.Close()
	// a's memory comes back once its test is done
	c := dialRaw(t, r.server)
	if _, err := c.start(setup); err != nil {
		t.Fatal(err)
	}
	c.finish()
}

func TestServerEndsATestItsClientNeverEnds(t *testing.T) {
	r := startRig(t, ServerConfig{GIDIndex: AutoGID, RunSlack: 200 * time.Millisecond})
	for _, name := range []string{"rc_rdma_read_bw", "rc_bw", "uc_bw", "rc_lat", "rc_rdma_write_lat", "ud_lat"} {
		t.Run(name, func(t *testing.T) {
			rc := dialRaw(t, r.server)
			if _, err := rc.start(setupLine(name, 64, 100*time.Millisecond)); err != nil {
				t.Fatal(err)
			}
			rc.say(`{"type":"start"}` + "\n") // and never "end"
			_, err := rc.c.recv(hangGuard, msgResult)
			rc.wantRefused(err, "the client did not end the test within 200ms of its 100ms")
		})
	}
}

func TestServerFinishesWithinItsSlackOfTheClientsEnd(t *testing.T) {
	r := startRig(t, ServerConfig{GIDIndex: AutoGID, RunSlack: 200 * time.Millisecond})
	// A client whose QP takes one of the server's messages and then posts
	// no receive: the rest of the server's stream waits on RNR, which it
	// retries for ever.
	cli, err := openSide(r.client, "", ibv.RC, 64, false)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.close()
	me, err := cli.self(0)
	if err != nil {
		t.Fatal(err)
	}
	rc := dialRaw(t, r.server)
	setup := fmt.Sprintf(`{"type":"setup","test":"rc_bi_bw","size":64,"time_ns":%d,"ep":%s}`+"\n", time.Hour, mustJSON(t, toWire(me)))
	ready, err := rc.start(setup)
	if err != nil {
		t.Fatal(err)
	}
	if err := cli.connect(ready.EP.peer(), 0); err != nil {
		t.Fatal(err)
	}
	if err := cli.postRecvs(1, 64); err != nil {
		t.Fatal(err)
	}
	rc.say(`{"type":"start"}` + "\n")
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	if _, err := spinPoll(ctx, cli.rcq, cli.wc[:1]); err != nil {
		t.Fatalf("the server's first message: %v", err)
	}
	rc.say(`{"type":"end"}` + "\n")
	_, err = rc.c.recv(hangGuard, msgResult)
	rc.wantRefused(err, `the server's end of the test did not finish within 200ms of the client's "end"`)
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestServerLogsAClientsWordsEscaped(t *testing.T) {
	tests := []struct {
		name, text, want string
	}{
		{"a forged line", `bye\nclient 192.0.2.1:1: rc_bw: forged`, `bye\nclient 192.0.2.1:1: rc_bw: forged`},
		{"terminal escapes", `\u001b[2J\u001b]0;pwned\u0007`, `\x1b[2J\x1b]0;pwned\a`},
		{"plain words", `déjà vu`, `déjà vu`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := startRig(t, ServerConfig{GIDIndex: AutoGID})
			rc := dialRaw(t, r.server)
			rc.say(goodHello)
			if _, err := rc.c.recv(hangGuard, msgHello); err != nil {
				t.Fatal(err)
			}
			rc.say(`{"type":"error","error":"` + tt.text + `"}` + "\n")
			if _, err := rc.c.recv(hangGuard, msgSetup); !errors.Is(err, io.EOF) {
				t.Fatalf("after the client's error the server sent %v; want it to close the connection", err)
			}
			var log string
			for n := 0; !strings.HasSuffix(log, "\n"); n++ { // it logs once it has closed
				if n == 1000 {
					t.Fatalf("the server logged nothing about the client")
				}
				time.Sleep(10 * time.Millisecond)
				log = r.errLog.String()
			}
			if strings.Count(log, "\n") != 1 || !strings.Contains(log, "the client: "+tt.want+"\n") {
				t.Errorf("the server logged %q; want one line ending in %q", log, "the client: "+tt.want)
			}
		})
	}
}
