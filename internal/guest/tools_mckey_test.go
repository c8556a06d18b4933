package guest

import (
	"strings"
	"testing"
	"time"
)

// waitOutput waits until p has printed want, failing the test if p ends
// first or does not print it within the tools' timeout.
func waitOutput(t *testing.T, p *toolProc, want string) {
	t.Helper()
	deadline := time.Now().Add(listenTimeout)
	for !strings.Contains(p.out.String(), want) {
		select {
		case <-p.done:
			t.Fatalf("%s ended (%v) before printing %q; it printed:\n%s", strings.Join(p.cmd.Args, " "), p.err, want, p.out.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not print %q within %v; it printed:\n%s", strings.Join(p.cmd.Args, " "), want, listenTimeout, p.out.String())
		}
	}
}

// TestToolMckey runs Debian's mckey on one host: a receiver joins the
// group 239.1.2.3 and a sender, joined too (full member, or send-only),
// sends it ten datagrams, which the receiver gets through the daemon's
// copy to the group's members (docs/design/multicast.md).
func TestToolMckey(t *testing.T) {
	requireTool(t, "mckey", rdmacmUtils)
	for _, tc := range []struct {
		name   string
		sender []string
	}{
		{"full member", []string{"-s"}},
		{"send-only", []string{"-s", "-o"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newToolHost(t)
			rcv := h.start(t, "", "mckey", "-m", "239.1.2.3", "-b", "127.0.0.1", "-C", "10")
			// mckey's stdout is a pipe, buffered to its end: the library's debug
			// line on stderr says when the receiver has joined.
			waitOutput(t, rcv, "rdma_cm: joined multicast group")
			snd := h.run(t, "", "mckey", append([]string{"-m", "239.1.2.3", "-b", "127.0.0.1", "-C", "10"}, tc.sender...)...)
			if !strings.Contains(snd, "joined dgid: ::ffff:239.1.2.3") {
				t.Errorf("the sender did not join; it printed:\n%s", snd)
			}
			<-rcv.done
			out := rcv.out.String()
			if rcv.err != nil {
				t.Fatalf("the receiver failed (%v); it printed:\n%s\nthe sender printed:\n%s", rcv.err, out, snd)
			}
			if !strings.Contains(out, "receiving data transfers") || !strings.Contains(out, "test complete") {
				t.Errorf("the receiver did not complete; it printed:\n%s\nthe sender printed:\n%s", out, snd)
			}
		})
	}
}
