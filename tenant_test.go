package vrdma_test

import (
	"strings"
	"testing"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/ibv"
	"github.com/vrdma/vrdma/internal/daemontest"
)

// TestDefaultInstanceIsNoTrustDomain: the default instance is open to every
// user of the daemon's socket, whoever they are, so two of its QPs never
// take the direct path to each other: a one-sided request goes through the
// daemon, which checks it.
func TestDefaultInstanceIsNoTrustDomain(t *testing.T) {
	sock := daemontest.Start(t)
	open := func() *directEnd {
		e := &directEnd{}
		var err error
		if e.dev, err = vrdma.Open("vrdma0", vrdma.Options{Socket: sock}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.dev.Close() })
		e.pd, _ = e.dev.AllocPD()
		if e.mr, err = e.pd.AllocMR(1<<16, directAccess); err != nil {
			t.Fatal(err)
		}
		e.cq, _ = e.dev.CreateCQ(64)
		if e.qp, err = e.pd.CreateQP(vrdma.QPInitAttr{Type: ibv.RC, SendCQ: e.cq, RecvCQ: e.cq,
			Cap: vrdma.QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
			t.Fatal(err)
		}
		return e
	}
	a, b := open(), open()
	ea, _ := a.qp.Endpoint(0)
	eb, _ := b.qp.Endpoint(0)
	o := vrdma.DefaultConnectOptions()
	if err := a.qp.Connect(eb, &o); err != nil {
		t.Fatal(err)
	}
	if err := b.qp.Connect(ea, &o); err != nil {
		t.Fatal(err)
	}
	if _, reason := a.qp.Path(); strings.Contains(reason, "trusted") {
		t.Fatalf("two QPs of the default instance: path reason %q, want no trust", reason)
	}
	before := a.daemonMessages(t)
	if err := a.qp.PostSend([]vrdma.SendWR{{ID: 1, Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSignaled,
		SGL: []ibv.SGE{a.mr.SGE(0, 64)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()}}); err != nil {
		t.Fatal(err)
	}
	if wc := a.completion(t); wc.Status != ibv.WCSuccess {
		t.Fatalf("write completion %+v", wc)
	}
	if n := a.daemonMessages(t) - before; n != 1 {
		t.Fatalf("the daemon carried %d messages of the write, want 1: it took the direct path", n)
	}
}
