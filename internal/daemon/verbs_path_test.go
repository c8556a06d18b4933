package daemon_test

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/daemon"
	"github.com/vrdma/vrdma/internal/proto"
)

// TestVerbsPathAcrossHosts: two hosts of a switch (two daemons in this
// process, on 127.0.0.1 and 127.0.0.2) each with a verbs uplink on an
// rdma_rxe device (the fake helper's) and no software link: `vrdma path`
// between their instances and `vrdma host show` name the matching devices
// (RoCE v2) and say the pair takes the TCP channel because neither daemon
// carries QPs on a device yet; --json gives the pair apart.
func TestVerbsPathAcrossHosts(t *testing.T) {
	helper := fakeVerbsHelper(t, "rxe")
	var clients [2]*rawClient
	var endpoints []string
	for i := range clients {
		dir, err := os.MkdirTemp("", "vrdma-vpath-") // short: a socket path has 108 bytes
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		name := fmt.Sprint("host", i+1)
		ip := netip.AddrFrom4([4]byte{127, 0, 0, byte(i + 1)})
		d := startDaemon(t, daemon.Config{SocketPath: filepath.Join(dir, "s.sock"), StateDir: filepath.Join(dir, "state"), HostName: name,
			VerbsHelper: helper, LinkPort: freeUDPPort(t),
			Switch: daemon.SwitchConfig{Enable: true, HostTag: name, TCPListen: ip.String() + ":0",
				TCPAddrs: []netip.Addr{ip}, Endpoints: endpoints, HostTTL: 2 * time.Second, Grace: time.Second}})
		endpoints = d.SwitchEndpoints()
		c := admin(t, d.SocketPath())
		c.ok(proto.OpLinkAdd, proto.LinkSpec{Name: "hca0", Type: "verbs", Dev: "rxe0"}, nil)
		c.ok(proto.OpCreateInstance, proto.InstanceSpec{Name: fmt.Sprint("vm", i+1), Adapters: 1}, nil)
		clients[i] = c
	}
	const (
		devices = "verbs uplinks hca0 (rxe0 on host host1) and hca0 (rxe0 on host host2) on port group default match (RoCE v2), " +
			"but the daemons of hosts host1 and host2 cannot carry QPs on a device yet; "
		reason = devices + "neither host host1 nor host host2 has an RDMA uplink on port group default"
	)
	deadline := time.Now().Add(30 * time.Second) // a hang guard: the records reach the other daemon in a moment
	for {
		var resp proto.PathResp
		r := clients[0].call(proto.OpPath, mustJSON(proto.PathReq{A: "vm2", B: "vm1"}))
		last := fmt.Sprintf("%v: %s", r.h.Code, r.msg())
		if r.h.Code == proto.CodeOK {
			if err := json.Unmarshal(r.body, &resp); err != nil {
				t.Fatal(err)
			}
			last = fmt.Sprintf("%+v (devices %+v)", resp, resp.Devices)
			want := proto.PathDevices{A: "hca0", B: "hca0", DeviceA: "rxe0", DeviceB: "rxe0", Mode: "RoCE v2",
				Blocked: "the daemons of hosts host1 and host2 cannot carry QPs on a device yet"}
			if resp.Kind == "tcp" && resp.Reason == reason && resp.HostA == "host2" && resp.Devices != nil && *resp.Devices == want {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("path vm2 vm1: %s\nwant tcp: %s", last, reason)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// What the QPs ask and the device lacks is said first: a path MTU over
	// rxe0's active 1024 bytes, as ibv_modify_qp would refuse it.
	var resp proto.PathResp
	clients[1].ok(proto.OpPath, proto.PathReq{A: "vm1", B: "vm2", Request: &proto.PathRequest{MTU: 4096}}, &resp)
	lack := "match (RoCE v2), but hca0 (rxe0, RoCE) on host host1 takes path MTU 1024, the instance asks for 4096: ibv_modify_qp would fail with EINVAL"
	if resp.Kind != "tcp" || !strings.Contains(resp.Reason, lack) || resp.Devices == nil || !strings.Contains(resp.Devices.Blocked, "path MTU 1024") {
		t.Errorf("path vm1 vm2 --mtu 4096: %+v (devices %+v); want tcp, %q", resp, resp.Devices, lack)
	}
	for i, c := range clients {
		other := fmt.Sprint("host", 2-i)
		deadline := time.Now().Add(30 * time.Second)
		for {
			var r proto.HostListResp
			c.ok(proto.OpHostList, nil, &r)
			path := ""
			for _, h := range r.Hosts {
				if h.Name == other {
					path = h.Path
				}
			}
			if path == "tcp: "+reason {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("host show on host%d: the path to %s is %q, want %q", i+1, other, path, "tcp: "+reason)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}
