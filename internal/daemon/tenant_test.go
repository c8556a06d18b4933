package daemon_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/daemon"
	"github.com/vrdma/vrdma/internal/daemontest"
	"github.com/vrdma/vrdma/internal/engine"
	"github.com/vrdma/vrdma/internal/proto"
)

// waitUsage waits until uid holds want (closed connections are cleaned up
// asynchronously); the timeout is a hang guard.
func waitUsage(t *testing.T, d *daemon.Daemon, uid uint32, want map[string]uint64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !maps.Equal(d.UsedBy(uid), want) {
		if time.Now().After(deadline) {
			t.Fatalf("uid %d holds %v, want %v", uid, d.UsedBy(uid), want)
		}
		time.Sleep(time.Millisecond)
	}
}

// everything creates one of every object a device has: a PD, a 4 KiB
// region, a CQ, an SRQ, an RC QP and an AH.
func everything(t *testing.T, c *rawClient) (pd, mr, cq, srq, qp, ah uint32) {
	t.Helper()
	var h proto.HandleResp
	c.ok(proto.OpAllocPD, nil, &h)
	pd = h.Handle
	r := c.call(proto.OpRegMR, mustJSON(proto.RegMRReq{PD: pd, Addr: 0x10000, Length: 4096, Access: uint32(abi.AccessLocalWrite)}), memfd(t, 4096, true))
	var m proto.RegMRResp
	if r.h.Code != proto.CodeOK || json.Unmarshal(r.body, &m) != nil {
		t.Fatalf("reg_mr: %v %s", r.h.Code, r.msg())
	}
	mr = m.Handle
	var cqr proto.CreateCQResp
	c.ok(proto.OpCreateCQ, proto.CreateCQReq{CQE: 16}, &cqr)
	cq = cqr.Handle
	var srqr proto.CreateSRQResp
	c.ok(proto.OpCreateSRQ, proto.CreateSRQReq{PD: pd, MaxWR: 8, MaxSGE: 1}, &srqr)
	srq = srqr.Handle
	var qpr proto.CreateQPResp
	c.ok(proto.OpCreateQP, proto.CreateQPReq{PD: pd, Type: uint8(abi.QPTypeRC), SendCQ: cq, RecvCQ: cq,
		Caps: proto.QPCaps{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}}, &qpr)
	qp = qpr.Handle
	c.ok(proto.OpCreateAH, proto.CreateAHReq{PD: pd, AV: anyGID}, &h)
	ah = h.Handle
	return
}

// TestQuotaComesBack: every object counts against its uid and instance
// while it lives; destroying it, or closing the connection, gives every
// unit back.
func TestQuotaComesBack(t *testing.T) {
	d := daemontest.StartDaemon(t)
	uid := uint32(os.Geteuid())
	adm := dial(t, d.SocketPath())
	adm.ok(proto.OpHello, proto.HelloReq{}, nil)
	adm.ok(proto.OpCreateInstance, proto.InstanceSpec{Name: "vm", Adapters: 1}, nil)
	idle := map[string]uint64{"session": 1, "instance": 1}
	waitUsage(t, d, uid, idle)

	c := dial(t, d.SocketPath())
	c.ok(proto.OpHello, proto.HelloReq{Instance: "vm", Device: "vrdma0"}, nil)
	pd, mr, cq, srq, qp, ah := everything(t, c)
	// Ring bytes: everything's CQ, SRQ and QP.
	qpRing, err := engine.QPBytes(proto.QPCaps{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}, false)
	if err != nil {
		t.Fatal(err)
	}
	ring := map[string]uint64{"cq": engine.CQBytes(16), "srq": engine.SRQBytes(8, 1), "qp": qpRing}
	full := map[string]uint64{"session": 2, "instance": 1, "pd": 1, "mr": 1, "locked": 4096, "cq": 1, "srq": 1, "qp": 1, "ah": 1,
		"ring": ring["cq"] + ring["srq"] + ring["qp"]}
	waitUsage(t, d, uid, full)
	if got, want := d.InstanceUsage("vm"), map[string]uint64{"session": 1, "pd": 1, "mr": 1, "locked": 4096, "cq": 1, "srq": 1, "qp": 1, "ah": 1, "ring": full["ring"]}; !maps.Equal(got, want) {
		t.Fatalf("instance vm holds %v, want %v", got, want)
	}
	// One by one.
	for _, step := range []struct {
		op proto.Op
		h  uint32
		r  string
	}{{proto.OpDestroyAH, ah, "ah"}, {proto.OpDestroyQP, qp, "qp"}, {proto.OpDestroySRQ, srq, "srq"}, {proto.OpDestroyCQ, cq, "cq"}, {proto.OpDeregMR, mr, "mr"}, {proto.OpDeallocPD, pd, "pd"}} {
		c.ok(step.op, proto.HandleReq{Handle: step.h}, nil)
		delete(full, step.r)
		if step.r == "mr" {
			delete(full, "locked")
		}
		if full["ring"] -= ring[step.r]; full["ring"] == 0 {
			delete(full, "ring")
		}
		waitUsage(t, d, uid, full)
	}
	// All at once, by closing the connection.
	everything(t, c)
	c.Close()
	waitUsage(t, d, uid, idle)
	if got := d.InstanceUsage("vm"); len(got) != 0 {
		t.Fatalf("instance vm holds %v after its session ended", got)
	}
	adm.ok(proto.OpDeleteInstance, proto.InstanceSpec{Name: "vm"}, nil)
	adm.Close()
	waitUsage(t, d, uid, map[string]uint64{})
}

// TestAdvertisedLimitsAreEnforced: query_device's maxima are the limits of
// the caller's uid and instance, and creating one more than advertised
// fails with CodeLimit naming the limit.
func TestAdvertisedLimitsAreEnforced(t *testing.T) {
	d := daemontest.StartWith(t, func(c *daemon.Config) {
		c.UserLimits = daemon.Limits{daemon.CQs: 5, daemon.PDs: 4, daemon.AHs: 3, daemon.SRQs: 2, daemon.QPs: 6, daemon.MRs: 3, daemon.Locked: 3 * 4096}
		c.InstanceLimits = daemon.Limits{daemon.CQs: 3, daemon.QPs: 100}
	})
	adm := dial(t, d.SocketPath())
	adm.ok(proto.OpHello, proto.HelloReq{}, nil)
	adm.ok(proto.OpCreateInstance, proto.InstanceSpec{Name: "vm", Adapters: 1}, nil)
	for _, inst := range []string{"", "vm"} {
		t.Run("instance="+inst, func(t *testing.T) {
			c := dial(t, d.SocketPath())
			defer func() {
				// The next case starts from nothing held: the daemon releases
				// a closed session's objects after the close returns.
				c.Close()
				uid := uint32(os.Getuid())
				deadline := time.Now().Add(10 * time.Second)
				for held := d.UsedBy(uid); held["pd"]+held["cq"]+held["mr"]+held["srq"]+held["ah"] != 0; held = d.UsedBy(uid) {
					if time.Now().After(deadline) {
						t.Fatalf("uid %d still holds %v after its session closed", uid, held)
					}
					time.Sleep(time.Millisecond)
				}
			}()
			var hello proto.HelloResp
			c.ok(proto.OpHello, proto.HelloReq{Instance: inst, Device: "vrdma0"}, &hello)
			var attr proto.DeviceAttr
			c.ok(proto.OpQueryDevice, nil, &attr)
			if *hello.Attr != attr {
				t.Fatalf("hello's attributes %+v differ from query_device's %+v", *hello.Attr, attr)
			}
			wantCQ := 5
			if inst == "vm" {
				wantCQ = 3 // the instance's limit is the smaller
			}
			if attr.MaxCQ != wantCQ || attr.MaxPD != 4 || attr.MaxAH != 3 || attr.MaxSRQ != 2 || attr.MaxQP != 6 || attr.MaxMR != 3 || attr.MaxMRSize != 3*4096 {
				t.Fatalf("advertised %+v", attr)
			}
			var pd proto.HandleResp
			create := map[string]func() reply{
				"pd": func() reply { return c.call(proto.OpAllocPD, nil) },
				"cq": func() reply { return c.call(proto.OpCreateCQ, mustJSON(proto.CreateCQReq{CQE: 4})) },
				"ah": func() reply { return c.call(proto.OpCreateAH, mustJSON(proto.CreateAHReq{PD: pd.Handle, AV: anyGID})) },
				"srq": func() reply {
					return c.call(proto.OpCreateSRQ, mustJSON(proto.CreateSRQReq{PD: pd.Handle, MaxWR: 4, MaxSGE: 1}))
				},
				"mr": func() reply {
					return c.call(proto.OpRegMR, mustJSON(proto.RegMRReq{PD: pd.Handle, Addr: 0x10000, Length: 4096, Access: 1}), memfd(t, 4096, true))
				},
			}
			c.ok(proto.OpAllocPD, nil, &pd)
			for _, k := range []struct {
				name string
				max  int
				held int // created already
			}{{"pd", attr.MaxPD, 1}, {"cq", attr.MaxCQ, 0}, {"ah", attr.MaxAH, 0}, {"srq", attr.MaxSRQ, 0}, {"mr", attr.MaxMR, 0}} {
				for i := k.held; i < k.max; i++ {
					r := create[k.name]()
					proto.CloseFDs(r.fds)
					if r.h.Code != proto.CodeOK {
						t.Fatalf("%s %d of %d advertised: %v %s", k.name, i+1, k.max, r.h.Code, r.msg())
					}
				}
				r := create[k.name]()
				proto.CloseFDs(r.fds)
				if r.h.Code != proto.CodeLimit || !strings.Contains(r.msg(), fmt.Sprintf("limit %s=%d", k.name, k.max)) {
					t.Fatalf("%s %d, one past the %d advertised: %v %q", k.name, k.max+1, k.max, r.h.Code, r.msg())
				}
			}
		})
	}
}

// TestTotalLockedLimit: the daemon-wide cap on locked bytes binds every
// session together, under each uid's own limit, is advertised as
// max_mr_size, and its refusal names the flag that raises it.
func TestTotalLockedLimit(t *testing.T) {
	d := daemontest.StartWith(t, func(c *daemon.Config) {
		c.UserLimits = daemon.Limits{daemon.Locked: daemon.Unlimited}
		c.TotalLimits = daemon.Limits{daemon.Locked: 1 << 20}
	})
	reg := func(c *rawClient, n int) reply {
		var pd proto.HandleResp
		c.ok(proto.OpAllocPD, nil, &pd)
		return c.call(proto.OpRegMR, mustJSON(proto.RegMRReq{PD: pd.Handle, Addr: 0x10000, Length: uint64(n), Access: 1}), memfd(t, n, true))
	}
	c1, c2 := dial(t, d.SocketPath()), dial(t, d.SocketPath())
	var attr proto.DeviceAttr
	for _, c := range []*rawClient{c1, c2} {
		c.ok(proto.OpHello, proto.HelloReq{Device: "vrdma0"}, nil)
	}
	c1.ok(proto.OpQueryDevice, nil, &attr)
	if attr.MaxMRSize != 1<<20 {
		t.Errorf("max_mr_size %d under a 1 MiB total, want %d", attr.MaxMRSize, 1<<20)
	}
	if r := reg(c1, 768<<10); r.h.Code != proto.CodeOK {
		t.Fatalf("768 KiB of a 1 MiB total: %v %s", r.h.Code, r.msg())
	}
	r := reg(c2, 512<<10)
	if r.h.Code != proto.CodeLimit || !strings.Contains(r.msg(), "all tenants together") || !strings.Contains(r.msg(), "--total-limit locked=BYTES") {
		t.Fatalf("512 KiB more, past the 1 MiB total: %v %q", r.h.Code, r.msg())
	}
	if got := d.TotalUsage()["locked"]; got != 768<<10 {
		t.Fatalf("the daemon counts %d bytes locked, want %d", got, 768<<10)
	}
	if r := reg(c2, 256<<10); r.h.Code != proto.CodeOK {
		t.Fatalf("the 256 KiB left: %v %s", r.h.Code, r.msg())
	}
	c1.Close()
	c2.Close()
	deadline := time.Now().Add(10 * time.Second) // hang guard: sessions end asynchronously
	for d.TotalUsage()["locked"] != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the daemon still counts %v after the sessions ended", d.TotalUsage())
		}
		time.Sleep(time.Millisecond)
	}
}

// TestTemporaryInstance: a temporary instance lives while its creator's
// session does or a process is attached, and is never saved.
func TestTemporaryInstance(t *testing.T) {
	d := daemontest.StartDaemon(t)
	exists := func(name string) bool {
		c := dial(t, d.SocketPath())
		defer c.Close()
		c.ok(proto.OpHello, proto.HelloReq{}, nil)
		var l proto.ListInstancesResp
		c.ok(proto.OpListInstances, nil, &l)
		for _, i := range l.Instances {
			if i.Name == name {
				if !i.Temporary {
					t.Errorf("instance %s is not marked temporary", name)
				}
				return true
			}
		}
		return false
	}
	gone := func(name string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for exists(name) {
			if time.Now().After(deadline) {
				t.Fatalf("temporary instance %s outlived its sessions", name)
			}
			time.Sleep(time.Millisecond)
		}
	}
	// The creator ends before anyone attaches.
	a := dial(t, d.SocketPath())
	a.ok(proto.OpHello, proto.HelloReq{}, nil)
	a.ok(proto.OpCreateInstance, proto.InstanceSpec{Name: "t1", Adapters: 1, Temporary: true}, nil)
	if !exists("t1") {
		t.Fatal("t1 was not created")
	}
	b, err := os.ReadFile(filepath.Join(filepath.Dir(d.SocketPath()), "state", "instances.json"))
	if err == nil && strings.Contains(string(b), "t1") {
		t.Fatalf("the temporary instance was saved: %s", b)
	}
	a.Close()
	gone("t1")

	// A process attached keeps it after the creator ends.
	a = dial(t, d.SocketPath())
	a.ok(proto.OpHello, proto.HelloReq{}, nil)
	a.ok(proto.OpCreateInstance, proto.InstanceSpec{Name: "t2", Adapters: 1, Temporary: true}, nil)
	user := dial(t, d.SocketPath())
	user.ok(proto.OpHello, proto.HelloReq{Instance: "t2", Device: "vrdma0"}, nil)
	a.Close()
	waitSessions(t, d, 1)
	if !exists("t2") {
		t.Fatal("t2 ended with its creator while a process is attached")
	}
	user.Close()
	gone("t2")
	waitUsage(t, d, uint32(os.Geteuid()), map[string]uint64{})
}

// TestOwnersPersist: an instance's owner is saved and restored; a file of
// a daemon before owners loads as root's, and saving adds the owners.
func TestOwnersPersist(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	if err := os.MkdirAll(state, 0o755); err != nil {
		t.Fatal(err)
	}
	old := `[{"name":"legacy","adapters":1,"async":false}]`
	if err := os.WriteFile(filepath.Join(state, "instances.json"), []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	start := func() (*daemon.Daemon, func()) {
		d, err := daemon.New(daemon.Config{SocketPath: filepath.Join(dir, "vrdma.sock"), StateDir: state, HostName: "test"})
		if err != nil {
			t.Fatal(err)
		}
		go d.Serve()
		return d, func() { d.Close() }
	}
	list := func(d *daemon.Daemon) map[string]proto.Owner {
		c := dial(t, d.SocketPath())
		defer c.Close()
		c.ok(proto.OpHello, proto.HelloReq{}, nil)
		var l proto.ListInstancesResp
		c.ok(proto.OpListInstances, nil, &l)
		out := map[string]proto.Owner{}
		for _, i := range l.Instances {
			if i.Owner == nil {
				t.Fatalf("instance %s has no owner", i.Name)
			}
			out[i.Name] = *i.Owner
		}
		return out
	}
	d, stop := start()
	c := dial(t, d.SocketPath())
	c.ok(proto.OpHello, proto.HelloReq{}, nil)
	c.ok(proto.OpCreateInstance, proto.InstanceSpec{Name: "theirs", Adapters: 1, Owner: &proto.Owner{UID: 4242, GID: 4343}}, nil)
	c.Close()
	// Root sees another owner's instance by its canonical name (u<uid>.NAME).
	want := map[string]proto.Owner{"default": {}, "legacy": {}, "u4242.theirs": {UID: 4242, GID: 4343}}
	if got := list(d); !maps.Equal(got, want) {
		t.Fatalf("owners %v, want %v", got, want)
	}
	stop()
	d, stop = start()
	defer stop()
	if got := list(d); !maps.Equal(got, want) {
		t.Fatalf("after a restart, owners %v, want %v", got, want)
	}
	if n := d.UsedBy(4242)["instance"]; n != 1 {
		t.Fatalf("uid 4242 holds %d instances after the restart, want 1", n)
	}
}

// TestSessionLimits: a uid's connections stop at its session limit, an
// instance's attached processes at the instance's; closing one makes room.
func TestSessionLimits(t *testing.T) {
	d := daemontest.StartWith(t, func(c *daemon.Config) {
		c.UserLimits = daemon.Limits{daemon.Sessions: 3}
		c.InstanceLimits = daemon.Limits{daemon.Sessions: 1}
	})
	adm := dial(t, d.SocketPath())
	adm.ok(proto.OpHello, proto.HelloReq{}, nil)
	adm.ok(proto.OpCreateInstance, proto.InstanceSpec{Name: "vm", Adapters: 1}, nil)
	in := dial(t, d.SocketPath())
	in.ok(proto.OpHello, proto.HelloReq{Instance: "vm", Device: "vrdma0"}, nil)
	second := dial(t, d.SocketPath())
	r := second.call(proto.OpHello, mustJSON(proto.HelloReq{Instance: "vm", Device: "vrdma0"}))
	if r.h.Code != proto.CodeLimit || !strings.Contains(r.msg(), "instance vm holds 1 sessions") || !strings.Contains(r.msg(), "--instance-limit session=N") {
		t.Fatalf("a second process on an instance limited to one: %v %q", r.h.Code, r.msg())
	}
	// The refused hello left the connection unattached; it may still use
	// the default instance, as the uid's third session.
	second.ok(proto.OpHello, proto.HelloReq{}, nil)
	fourth := dial(t, d.SocketPath())
	if r := fourth.recv(); r.err != nil || r.h.ID != 0 || r.h.Code != proto.CodeLimit || !strings.Contains(r.msg(), "holds 3 sessions of 3 allowed") {
		t.Fatalf("the uid's fourth session: %+v %v %q", r.h, r.err, r.msg())
	}
	in.Close()
	waitSessions(t, d, 2)
	again := dial(t, d.SocketPath())
	again.ok(proto.OpHello, proto.HelloReq{Instance: "vm", Device: "vrdma0"}, nil)
}
