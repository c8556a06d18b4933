package daemon_test

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/daemon"
	"github.com/vrdma/vrdma/internal/daemontest"
	"github.com/vrdma/vrdma/internal/proto"
	"github.com/vrdma/vrdma/internal/qpstate"
)

// The adapters' LIDs and the address vectors that name a port by LID
// alone. The conformance suite (package vrdma) runs verbs by LID on one
// host; these tests cover what only the daemon sees: LIDs across instances
// and hosts of the switch, their resolution to another host's port, and
// restarts.

// lidHost is a daemon of a two-host switch in this process: host1 runs
// the switch's etcd, host2 joins it.
type lidHost struct {
	name string
	cfg  daemon.Config
	d    *daemon.Daemon
}

// startLIDHost starts host i (1 or 2) of the switch whose etcd is at
// endpoints (nil: its own), in state directory dir.
func startLIDHost(t *testing.T, i int, dir string, endpoints []string) *lidHost {
	t.Helper()
	name := fmt.Sprint("host", i)
	ip := netip.AddrFrom4([4]byte{127, 0, 0, byte(i)})
	h := &lidHost{name: name, cfg: daemon.Config{
		SocketPath: filepath.Join(dir, "s.sock"), StateDir: filepath.Join(dir, "state"), HostName: name, LIDRouting: true,
		Switch: daemon.SwitchConfig{Enable: true, HostTag: name, TCPListen: ip.String() + ":0", TCPAddrs: []netip.Addr{ip},
			Endpoints: endpoints, HostTTL: 2 * time.Second, Grace: time.Second},
	}}
	h.start(t)
	return h
}

func (h *lidHost) start(t *testing.T) {
	t.Helper()
	d, err := daemon.New(h.cfg)
	if err != nil {
		t.Fatal(err)
	}
	go d.Serve()
	t.Cleanup(func() { d.Close() })
	h.d = d
}

// lidDir is a short temporary directory (a socket path has 108 bytes).
func lidDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "vrdma-lid-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// port is one adapter port: its daemon's socket, instance and device.
type port struct{ sock, inst, dev string }

func (p port) String() string {
	inst := p.inst
	if inst == "" {
		inst = "default"
	}
	return inst + "/" + p.dev
}

// open opens p as a device session.
func (p port) open(t *testing.T) *rawClient {
	t.Helper()
	c := dial(t, p.sock)
	c.ok(proto.OpHello, proto.HelloReq{Instance: p.inst, Device: p.dev, Client: "lid-test"}, nil)
	return c
}

// attr returns p's port attributes.
func (p port) attr(t *testing.T) proto.PortAttr {
	t.Helper()
	c := p.open(t)
	defer c.Close()
	var pa proto.PortAttr
	c.ok(proto.OpQueryPort, proto.QueryPortReq{Port: 1}, &pa)
	return pa
}

// lid waits until p has a LID (the subnet manager assigns it a moment
// after the instance appears: creating an instance waits for it, but not
// for ever) and returns it.
func (p port) lid(t *testing.T) uint16 {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second) // a hang guard
	for {
		if lid := p.attr(t).LID; lid != 0 {
			return lid
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s has no LID", p)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func createInstance(t *testing.T, sock, name string, adapters int) {
	t.Helper()
	c := dial(t, sock)
	defer c.Close()
	c.ok(proto.OpHello, proto.HelloReq{Client: "lid-test"}, nil)
	c.ok(proto.OpCreateInstance, proto.InstanceSpec{Name: name, Adapters: adapters}, nil)
}

// rcToLID creates an RC QP on c's device, takes it to INIT and then to RTR
// towards av, and returns the reply to that last modify_qp and the QP's
// handle.
func rcToLID(t *testing.T, c *rawClient, av qpstate.AddressVector) (reply, uint32) {
	t.Helper()
	var pd proto.HandleResp
	c.ok(proto.OpAllocPD, nil, &pd)
	var cq proto.CreateCQResp
	c.ok(proto.OpCreateCQ, proto.CreateCQReq{CQE: 16}, &cq)
	var qp proto.CreateQPResp
	c.ok(proto.OpCreateQP, proto.CreateQPReq{PD: pd.Handle, Type: uint8(abi.QPTypeRC), SendCQ: cq.Handle, RecvCQ: cq.Handle,
		Caps: proto.QPCaps{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}}, &qp)
	c.ok(proto.OpModifyQP, proto.ModifyQPReq{Handle: qp.Handle, Mask: uint32(qpstate.MaskState | qpstate.MaskPort | qpstate.MaskPKeyIndex | qpstate.MaskAccessFlags),
		Attr: qpstate.Attr{State: abi.QPStateInit, PortNum: 1, AccessFlags: abi.AccessAll}}, nil)
	rtr := qpstate.Attr{State: abi.QPStateRTR, AV: av, PathMTU: abi.MTU1024, DestQPN: 0x11, RQPSN: 1, MaxDestRdAtomic: 1, MinRNRTimer: 12}
	return c.call(proto.OpModifyQP, mustJSON(proto.ModifyQPReq{Handle: qp.Handle, Mask: uint32(qpstate.MaskState | qpstate.MaskAV | qpstate.MaskPathMTU |
		qpstate.MaskDestQPN | qpstate.MaskRQPSN | qpstate.MaskMaxDestRdAtomic | qpstate.MaskMinRNRTimer), Attr: rtr})), qp.Handle
}

// firstOfFamily is the first GID of table of sgid's family (IPv4 or IPv6).
func firstOfFamily(t *testing.T, table [][]byte, sgid []byte) [16]byte {
	t.Helper()
	v4 := func(g []byte) bool { return netip.AddrFrom16([16]byte(g)).Is4In6() }
	for _, g := range table {
		if v4(g) == v4(sgid) {
			return [16]byte(g)
		}
	}
	t.Fatalf("no GID of %v's family in %v", sgid, table)
	return [16]byte{}
}

// TestLIDsOnTheSwitch: every adapter of the switch — the instances' and
// each host's default instance's — has a LID no other adapter has; a QP
// or an address handle may name a port by LID alone, on this host or on
// another, and goes there as if it had named the port's GID (which
// query_qp reports, with the LID); a LID no port has is refused; after a
// daemon restarts, its adapters have the LIDs they had.
func TestLIDsOnTheSwitch(t *testing.T) {
	dir1, dir2 := lidDir(t), lidDir(t)
	h1 := startLIDHost(t, 1, dir1, nil)
	h2 := startLIDHost(t, 2, dir2, h1.d.SwitchEndpoints())
	createInstance(t, h1.cfg.SocketPath, "vm1", 2)
	createInstance(t, h2.cfg.SocketPath, "vm2", 1)

	s1, s2 := h1.cfg.SocketPath, h2.cfg.SocketPath
	ports := []port{{s1, "", "vrdma0"}, {s1, "vm1", "vrdma0"}, {s1, "vm1", "vrdma1"}, {s2, "", "vrdma0"}, {s2, "vm2", "vrdma0"}}
	lids := map[port]uint16{}
	owner := map[uint16]port{}
	for _, p := range ports {
		lid := p.lid(t)
		if lid > 0xBFFF {
			t.Errorf("%s on %s has LID %#x: not a unicast LID", p, p.sock, lid)
		}
		if other, dup := owner[lid]; dup {
			t.Errorf("%s and %s both have LID %#x", p, other, lid)
		}
		lids[p], owner[lid] = lid, p
	}
	free := uint16(0xBFFF)
	for owner[free] != (port{}) {
		free--
	}

	from := port{s1, "", "vrdma0"}
	sgid := from.attr(t).GIDs[0]
	// host1 learns host2's LIDs and record from the switch a moment after
	// host2 has them (a hang guard).
	for _, p := range ports {
		waitResolves(t, from, lids[p])
	}
	for _, tc := range []struct {
		name string
		to   port   // the port named by LID; zero: lid below
		lid  uint16 // when to is zero
		path string // the QP's path, "" when refused
		want string // the refusal
	}{
		{name: "an adapter of another instance of this host", to: port{s1, "vm1", "vrdma1"}, path: "memcpy"},
		{name: "the adapter itself", to: from, path: "memcpy"},
		{name: "an instance's adapter on another host", to: port{s2, "vm2", "vrdma0"}, path: "tcp"},
		{name: "another host's default instance", to: port{s2, "", "vrdma0"}, path: "tcp"},
		{name: "a LID no port has", lid: free, want: fmt.Sprintf("no port with LID 0x%x on the switch", free)},
		{name: "a multicast LID", lid: 0xC000, want: "not a unicast LID"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lid, want := tc.lid, [16]byte{}
			if tc.to != (port{}) {
				lid = lids[tc.to]
				want = firstOfFamily(t, tc.to.attr(t).GIDs, sgid)
			}
			c := from.open(t)
			defer c.Close()
			r, qp := rcToLID(t, c, qpstate.AddressVector{DLID: lid, PortNum: 1})
			var pd proto.HandleResp
			c.ok(proto.OpAllocPD, nil, &pd)
			ahr := c.call(proto.OpCreateAH, mustJSON(proto.CreateAHReq{PD: pd.Handle, AV: qpstate.AddressVector{DLID: lid, PortNum: 1}}))
			proto.CloseFDs(ahr.fds)
			if tc.want != "" {
				if r.h.Code != proto.CodeAttr || !strings.Contains(r.msg(), tc.want) {
					t.Errorf("modify_qp to RTR at LID %#x: %v %q; want %v saying %q", lid, r.h.Code, r.msg(), proto.CodeAttr, tc.want)
				}
				if ahr.h.Code != proto.CodeInvalid || !strings.Contains(ahr.msg(), tc.want) {
					t.Errorf("create_ah at LID %#x: %v %q; want %v saying %q", lid, ahr.h.Code, ahr.msg(), proto.CodeInvalid, tc.want)
				}
				return
			}
			if r.h.Code != proto.CodeOK || ahr.h.Code != proto.CodeOK {
				t.Fatalf("modify_qp to RTR at LID %#x: %v %q; create_ah: %v %q; want both done", lid, r.h.Code, r.msg(), ahr.h.Code, ahr.msg())
			}
			var q proto.QueryQPResp
			c.ok(proto.OpQueryQP, proto.HandleReq{Handle: qp}, &q)
			if q.Attr.AV.DGID != want || q.Attr.AV.DLID != lid || q.Path != tc.path {
				t.Errorf("query_qp: DGID %v, DLID %#x, path %q; want %v (the port's GID), %#x, %q",
					netip.AddrFrom16(q.Attr.AV.DGID), q.Attr.AV.DLID, q.Path, netip.AddrFrom16(want), lid, tc.path)
			}
		})
	}

	// host2's daemon restarts on its saved state: the LIDs of its
	// adapters are theirs again, and host1 resolves them.
	if err := h2.d.Close(); err != nil {
		t.Fatal(err)
	}
	h2.start(t)
	for _, p := range ports {
		if p.sock != s2 {
			continue
		}
		if got := p.lid(t); got != lids[p] {
			t.Errorf("after host2's restart %s has LID %#x, had %#x", p, got, lids[p])
		}
	}
	waitResolves(t, from, lids[port{s2, "vm2", "vrdma0"}])
}

// waitResolves waits until a QP of from reaches LID lid (a hang guard).
func waitResolves(t *testing.T, from port, lid uint16) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c := from.open(t)
		r, _ := rcToLID(t, c, qpstate.AddressVector{DLID: lid, PortNum: 1})
		c.Close()
		if r.h.Code == proto.CodeOK {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not reach LID %#x: %v %s", from, lid, r.h.Code, r.msg())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestLIDsWithoutSwitch: a daemon on no switch gives its adapters the
// lowest LIDs free on the host, keeps them across a restart (saved with
// the instances, whatever was created and deleted in between), and knows
// no LID but its own adapters'.
func TestLIDsWithoutSwitch(t *testing.T) {
	dir := lidDir(t)
	cfg := func(c *daemon.Config) {
		c.SocketPath, c.StateDir = filepath.Join(dir, "s.sock"), filepath.Join(dir, "state")
		c.LIDRouting = true
	}
	d := daemontest.StartWith(t, cfg)
	sock := d.SocketPath()
	createInstance(t, sock, "b", 2)
	createInstance(t, sock, "a", 1) // after b: a name that sorts first, created last
	createInstance(t, sock, "gone", 1)
	c := dial(t, sock)
	c.ok(proto.OpHello, proto.HelloReq{Client: "lid-test"}, nil)
	c.ok(proto.OpDeleteInstance, proto.InstanceSpec{Name: "gone"}, nil)
	c.Close()
	createInstance(t, sock, "c", 1) // takes the LID "gone" had

	ports := []port{{sock, "", "vrdma0"}, {sock, "b", "vrdma0"}, {sock, "b", "vrdma1"}, {sock, "a", "vrdma0"}, {sock, "c", "vrdma0"}}
	want := []uint16{1, 2, 3, 4, 5}
	got := map[port]uint16{}
	for i, p := range ports {
		got[p] = p.attr(t).LID
		if got[p] != want[i] {
			t.Errorf("%s has LID %#x, want %#x (the lowest free when it was created)", p, got[p], want[i])
		}
	}

	from := port{sock, "a", "vrdma0"}
	c = from.open(t)
	r, _ := rcToLID(t, c, qpstate.AddressVector{DLID: 6, PortNum: 1})
	if r.h.Code != proto.CodeAttr || !strings.Contains(r.msg(), "no port with LID 0x6 on this host") {
		t.Errorf("modify_qp to RTR at a LID no port has: %v %q; want %v naming it", r.h.Code, r.msg(), proto.CodeAttr)
	}
	c.Close()

	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	daemontest.StartWith(t, cfg)
	for _, p := range ports {
		if lid := p.attr(t).LID; lid != got[p] {
			t.Errorf("after a restart %s has LID %#x, had %#x", p, lid, got[p])
		}
	}
}
