package daemon

import (
	"errors"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/proto"
)

// The tests of the switch's commands. The agent's own (joining, the lease,
// the candidacy, the authorizer and the resolver, routes) are package
// switchagent's.

// switchDaemon starts a daemon on its own embedded switch.
func switchDaemon(t *testing.T, host string) *Daemon {
	t.Helper()
	dir := t.TempDir()
	d, err := New(Config{SocketPath: filepath.Join(dir, "s.sock"), StateDir: filepath.Join(dir, "state"), HostName: host,
		Switch: SwitchConfig{Enable: true, TCPListen: "127.0.0.1:0", TCPAddrs: []netip.Addr{netip.MustParseAddr("127.0.0.1")},
			HostTTL: 2 * time.Second, Grace: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	go d.Serve()
	t.Cleanup(func() { d.Close() })
	return d
}

// Bad bodies for every switch command get a clear error, never an internal
// one, and the daemon goes on.
func TestSwitchCommandsBadInput(t *testing.T) {
	d := switchDaemon(t, "h2")
	s := &session{d: d}
	cmds := map[string]func(*session, []byte, []int) (any, []int, error){
		"portgroup_add": cmdPortGroupAdd, "portgroup_delete": cmdPortGroupDelete, "path": cmdPath,
	}
	bodies := []string{"", "{", "[]", "null", `{"name":""}`, `{"name":"x","vlan":5000}`, `{"name":"x","mtu":1000}`,
		`{"name":"x","pkey":32768}`, `{"name":"-x"}`, `{"name":"default"}`, `{"name":"nosuch"}`,
		`{"a":"","b":""}`, `{"a":"/vrdma0","b":"x"}`, `{"a":"x/vrdma99","b":"y"}`, `{"a":"x/rdma0","b":"y"}`, `{"a":"nosuch","b":"nosuch2"}`}
	for name, run := range cmds {
		for _, b := range bodies {
			_, _, err := run(s, []byte(b), nil)
			if err == nil {
				continue // some bodies are good for some commands
			}
			var pe *proto.Error
			if !errors.As(err, &pe) || pe.Code == proto.CodeInternal || pe.Message == "" {
				t.Errorf("%s %q: %v: want a clear, non-internal error", name, b, err)
			}
		}
	}
	for _, run := range []func(*session, []byte, []int) (any, []int, error){cmdSwitchShow, cmdPortGroupList, cmdHostList} {
		if _, _, err := run(s, []byte("garbage"), nil); err != nil {
			t.Errorf("a list command with a garbage body: %v; want the body ignored", err)
		}
	}
}
