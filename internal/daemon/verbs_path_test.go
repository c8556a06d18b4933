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
	"github.com/vrdma/vrdma/switchview"
)

// TestVerbsPathAcrossHosts: two hosts of a switch (two daemons in this
// process, on 127.0.0.1 and 127.0.0.2) each with a verbs uplink on an
// rdma_rxe device (the fake helper's) and no software link; both daemons
// carry RC QPs on their devices (the gate). `vrdma path` follows the
// instances' bindings: unbound instances take the TCP channel and the
// reason names the matching devices and that the instances are not bound
// to them; instances bound on both hosts take the devices (--json names
// the uplinks); a bound instance and an unbound one have no path (the TCP
// channel cannot reach a device's QPs), nor bound ones whose QPs ask what
// the data path does not carry yet (UD) or the device lacks (path MTU).
// `vrdma host show` gives the unbound path and, per verbs uplink, that of
// instances bound to it.
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
		c.ok(proto.OpCreateInstance, proto.InstanceSpec{Name: fmt.Sprint("vb", i+1), Adapters: 1, Uplink: "hca0"}, nil)
		clients[i] = c
	}
	const (
		devices = "verbs uplinks hca0 (rxe0 on host host1) and hca0 (rxe0 on host host2) on port group default match (RoCE v2), " +
			"but the adapters' instances are not bound to them (an instance made with `vrdma vm create --uplink hca0` has its QPs on the device); "
		reason = devices + "neither host host1 nor host host2 has an RDMA uplink on port group default"
	)
	path := func(c *rawClient, req proto.PathReq) (switchview.Path, string) {
		t.Helper()
		var resp switchview.Path
		r := c.call(proto.OpPath, mustJSON(req))
		if r.h.Code != proto.CodeOK {
			return resp, fmt.Sprintf("%v: %s", r.h.Code, r.msg())
		}
		if err := json.Unmarshal(r.body, &resp); err != nil {
			t.Fatal(err)
		}
		return resp, ""
	}
	deadline := time.Now().Add(30 * time.Second) // a hang guard: the records reach the other daemon in a moment
	for {
		resp, fail := path(clients[0], proto.PathReq{A: "vm2", B: "vm1"})
		last := fail
		if fail == "" {
			last = fmt.Sprintf("%+v (devices %+v)", resp, resp.Devices)
			want := switchview.PathDevices{A: "hca0", B: "hca0", DeviceA: "rxe0", DeviceB: "rxe0", Mode: "RoCE v2",
				Blocked: "the adapters' instances are not bound to them (an instance made with `vrdma vm create --uplink hca0` has its QPs on the device)"}
			if resp.Kind == "tcp" && resp.Reason == reason && resp.HostA == "host2" && resp.Devices != nil && *resp.Devices == want {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("path vm2 vm1: %s\nwant tcp: %s", last, reason)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Bound on both hosts: the devices.
	resp, fail := path(clients[1], proto.PathReq{A: "vb2", B: "vb1"})
	want := "vb1/vrdma0 is bound to verbs uplink hca0 (rxe0 on host host1) and vb2/vrdma0 is bound to verbs uplink hca0 (rxe0 on host host2) on port group default: their QPs are the devices', RoCE v2"
	if fail != "" || resp.Kind != "verbs" || resp.Reason != want || resp.HostA != "host2" || resp.UplinkA != "hca0" || resp.UplinkB != "hca0" ||
		resp.Devices == nil || resp.Devices.Blocked != "" || resp.Devices.Mode != "RoCE v2" {
		t.Errorf("path vb2 vb1: %+v (devices %+v) %s\nwant verbs: %s", resp, resp.Devices, fail, want)
	}
	// QPs on an SRQ take the devices too (the daemons carry SRQs on them).
	if resp, fail := path(clients[0], proto.PathReq{A: "vb1", B: "vb2", Request: &switchview.PathRequest{SRQ: true}}); fail != "" || resp.Kind != "verbs" {
		t.Errorf("path vb1 vb2 --srq: %+v %s; want verbs", resp, fail)
	}
	// No path where the QPs could not meet, each with why.
	for _, tc := range []struct {
		req  proto.PathReq
		want string
	}{
		{proto.PathReq{A: "vb1", B: "vm2"}, "vb1/vrdma0 is bound to verbs uplink hca0 (rxe0 on host host1): its QPs are the device's; vm2/vrdma0 is not bound and host host2 has no RDMA uplink on port group default, and the TCP channel cannot reach a device's QPs"},
		{proto.PathReq{A: "vb1", B: "vb2", Request: &switchview.PathRequest{UD: true, MaxInline: 64}}, "their QPs have no path but the devices', and the daemons of hosts host1 and host2 do not carry inline data on UD QPs on a device yet"},
		{proto.PathReq{A: "vb1", B: "vb2", Request: &switchview.PathRequest{MTU: 4096}}, "hca0 (rxe0, RoCE) on host host1 takes path MTU 1024, the instance asks for 4096: ibv_modify_qp would fail with EINVAL"},
		{proto.PathReq{A: "vb1", B: "vm1"}, "same host host1, but vb1/vrdma0 is bound to verbs uplink hca0: its QPs are the device's, and vm1/vrdma0 is not bound"},
	} {
		r := clients[0].call(proto.OpPath, mustJSON(tc.req))
		if r.h.Code != proto.CodeInvalid || !strings.Contains(r.msg(), tc.want) {
			t.Errorf("path %s %s (%+v): %v %q; want no path: %q", tc.req.A, tc.req.B, tc.req.Request, r.h.Code, r.msg(), tc.want)
		}
	}
	// What the QPs ask and the device lacks is said first for unbound
	// instances too: a path MTU over rxe0's active 1024 bytes.
	clients[1].ok(proto.OpPath, proto.PathReq{A: "vm1", B: "vm2", Request: &switchview.PathRequest{MTU: 4096}}, &resp)
	lack := "match (RoCE v2), but hca0 (rxe0, RoCE) on host host1 takes path MTU 1024, the instance asks for 4096: ibv_modify_qp would fail with EINVAL"
	if resp.Kind != "tcp" || !strings.Contains(resp.Reason, lack) || resp.Devices == nil || !strings.Contains(resp.Devices.Blocked, "path MTU 1024") {
		t.Errorf("path vm1 vm2 --mtu 4096: %+v (devices %+v); want tcp, %q", resp, resp.Devices, lack)
	}
	for i, c := range clients {
		self, other := fmt.Sprint("host", i+1), fmt.Sprint("host", 2-i)
		wantBound := switchview.BoundPath{Uplink: "hca0",
			ToBound:   "verbs: an instance on host host1 is bound to verbs uplink hca0 (rxe0 on host host1) and an instance on host host2 is bound to verbs uplink hca0 (rxe0 on host host2) on port group default: their QPs are the devices', RoCE v2",
			ToUnbound: "none: an instance on host " + self + " is bound to verbs uplink hca0 (rxe0 on host " + self + "): its QPs are the device's; an instance on host " + other + " is not bound and host " + other + " has no RDMA uplink on port group default, and the TCP channel cannot reach a device's QPs: only RoCE v2 on the wire does (a native RoCE peer, or vrdma's software RoCEv2 on an rxe link); bound to hca0 (vrdma vm create --uplink hca0), an instance on host " + other + " would take the devices"}
		deadline := time.Now().Add(30 * time.Second)
		for {
			var r switchview.HostList
			c.ok(proto.OpHostList, nil, &r)
			var got switchview.Host
			for _, h := range r.Hosts {
				if h.Name == other {
					got = h
				}
			}
			if got.Path == "tcp: "+reason && len(got.Bound) == 1 && got.Bound[0] == wantBound {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("host show on %s: the path to %s is %q, bound %+v\nwant %q, %+v", self, other, got.Path, got.Bound, "tcp: "+reason, wantBound)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}
