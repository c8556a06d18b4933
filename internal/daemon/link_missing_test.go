package daemon

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestSavedLinkWithoutItsInterface: a saved link whose interface is
// missing (or whose port is taken) has no GID; a daemon on a switch still
// starts, and its host record shows the uplink down.
func TestSavedLinkWithoutItsInterface(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	if err := os.MkdirAll(state, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(state, linksFile), []byte(`[{"name":"rxe9","type":"rxe","netdev":"vrdma-none0"}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := New(Config{SocketPath: filepath.Join(dir, "s.sock"), StateDir: state, HostName: "h1",
		Switch: SwitchConfig{Enable: true, TCPListen: "127.0.0.1:0", TCPAddrs: []netip.Addr{netip.MustParseAddr("127.0.0.1")}}})
	if err != nil {
		t.Fatalf("a daemon with a saved link whose interface is missing: %v", err)
	}
	go d.Serve()
	defer d.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h, err := d.sw.agent.Fabric().Host(ctx, "h1")
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range h.Uplinks {
		if u.Name == "rxe9" && (u.State != "down" || len(u.GIDs) != 0) {
			t.Errorf("uplink rxe9 in the record: %+v, want down without GIDs", u)
		}
	}
}
