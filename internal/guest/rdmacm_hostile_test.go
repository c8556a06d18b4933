package guest

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/vrdma/vrdma/internal/daemontest"
	"github.com/vrdma/vrdma/internal/proto"
)

// TestRdmacmAgainstAHostileDaemon runs csrc/tests/rdmacm_peer.c through a
// proxy in front of a real daemon that injects impossible connection
// manager events on the program's first cm_listen, answers its cm_connect
// with "not found" and cuts the connection on its second cm_listen (see the
// program's comment for what it checks).
func TestRdmacmAgainstAHostileDaemon(t *testing.T) {
	cc := requireToolchain(t)
	bin := buildCTest(t, cc, append(append([]string(nil), libFlags...), sanitizeFlags...), "rdmacm_peer.c")
	daemonSock := daemontest.Start(t)
	sock := filepath.Join(t.TempDir(), "proxy.sock")
	l, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: sock, Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	p := &hostileProxy{daemon: daemonSock}
	go p.serve(l)
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin)
	cmd.Env = append(os.Environ(), append(sanitizeEnv, "VRDMA_SOCKET="+sock, "VRDMA_INSTANCE=", "VRDMA_DEBUG=1")...)
	out, err := cmd.CombinedOutput()
	l.Close()
	p.wg.Wait()
	if err != nil {
		t.Fatalf("rdmacm_peer: %v\n%s", err, out)
	}
	if p.injected.Load() == 0 {
		t.Fatalf("the proxy never saw a cm_listen, so it injected nothing:\n%s", out)
	}
	if p.refused.Load() != 1 {
		t.Errorf("the proxy answered %d cm_connect requests, want 1:\n%s", p.refused.Load(), out)
	}
	if !strings.Contains(string(out), "dropped") {
		t.Errorf("the library logged no dropped event:\n%s", out)
	}
}

// hostileProxy forwards every connection to the daemon, injecting and
// cutting as TestRdmacmAgainstAHostileDaemon says.
type hostileProxy struct {
	daemon   string
	listens  atomic.Int32
	injected atomic.Int32
	refused  atomic.Int32 // cm_connect requests answered "not found"
	wg       sync.WaitGroup
}

func (p *hostileProxy) serve(l *net.UnixListener) {
	for {
		c, err := l.AcceptUnix()
		if err != nil {
			return
		}
		d, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: p.daemon, Net: "unixpacket"})
		if err != nil {
			c.Close()
			continue
		}
		client, daemon := proto.NewConn(c), proto.NewClientConn(d)
		p.wg.Add(2)
		go func() { // daemon to client, as is
			defer p.wg.Done()
			forward(daemon, client)
			client.Close()
		}()
		go func() { // client to daemon, watching for cm_listen
			defer p.wg.Done()
			defer daemon.Close()
			for {
				h, body, fds, err := client.Recv()
				if err != nil {
					proto.CloseFDs(fds)
					return
				}
				if h.Kind == proto.KindRequest && h.Op == proto.OpCMConnect {
					proto.CloseFDs(fds)
					p.refused.Add(1)
					_ = client.Send(proto.Header{Kind: proto.KindReply, Op: h.Op, ID: h.ID, Code: proto.CodeNotFound},
						map[string]string{"error": "cannot find the connection manager of 127.0.0.7"})
					continue
				}
				if h.Kind == proto.KindRequest && h.Op == proto.OpCMListen {
					switch p.listens.Add(1) {
					case 1:
						var req proto.CMListenReq
						_ = json.Unmarshal(body, &req)
						p.inject(client, req.ID)
					case 2: // the daemon goes away
						proto.CloseFDs(fds)
						client.Close()
						return
					}
				}
				err = send(daemon, h, body, fds)
				proto.CloseFDs(fds)
				if err != nil {
					return
				}
			}
		}()
	}
}

// inject sends the client events that cannot be for listener id.
func (p *hostileProxy) inject(c *proto.Conn, id uint32) {
	ev := proto.Header{Kind: proto.KindEvent, Op: proto.OpCMEvent}
	for _, e := range []proto.CMEvent{
		{Type: proto.CMEventReply, ID: id, QPN: 5, PSN: 1, MTU: 3},
		{Type: proto.CMEventEstablished, ID: id},
		{Type: proto.CMEventDisconnected, ID: id},
		{Type: proto.CMEventRequest, ID: proto.CMDaemonIDBase + 5, Listener: id + 77},
		{Type: proto.CMEventRejected, ID: 4242, Reason: 28},
		{Type: proto.CMEventRejected, ID: id, Text: strings.Repeat("x", 200)},
	} {
		_ = c.Send(ev, e)
		p.injected.Add(1)
	}
	_ = send(c, ev, []byte("{"), nil)
	_ = send(c, ev, []byte(`{"type":2,"id":1,"qpn":16777216}`), nil)
}

// forward copies messages from one side to the other until either ends.
func forward(from, to *proto.Conn) {
	for {
		h, body, fds, err := from.Recv()
		if err != nil {
			proto.CloseFDs(fds)
			return
		}
		err = send(to, h, body, fds)
		proto.CloseFDs(fds)
		if err != nil {
			return
		}
	}
}

// send writes a message with its body as it is (not re-encoded).
func send(c *proto.Conn, h proto.Header, body []byte, fds []int) error {
	h.Version = proto.Version
	h.BodyLen = uint32(len(body))
	msg := append(proto.AppendHeader(nil, h), body...)
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	_, _, err := c.Raw().WriteMsgUnix(msg, oob, nil)
	return err
}
