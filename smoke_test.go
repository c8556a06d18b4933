package vrdma_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/ibv"
	"github.com/vrdma/vrdma/internal/daemontest"
)

func TestSmokeRCWrite(t *testing.T) {
	sock := daemontest.Start(t)
	o := vrdma.Options{Socket: sock}
	adm, err := vrdma.DialAdmin(o)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	if _, err := adm.CreateInstance(vrdma.InstanceSpec{Name: "b", Adapters: 1}); err != nil {
		t.Fatal(err)
	}
	da, err := vrdma.Open("vrdma0", o)
	if err != nil {
		t.Fatal(err)
	}
	defer da.Close()
	ob := o
	ob.Instance = "b"
	db, err := vrdma.Open("vrdma0", ob)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	pa, _ := da.AllocPD()
	pb, _ := db.AllocPD()
	ma, err := pa.AllocMR(4096, ibv.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	mb, err := pb.AllocMR(4096, ibv.AccessLocalWrite|ibv.AccessRemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := da.CreateCQ(16)
	cb, _ := db.CreateCQ(16)
	caps := vrdma.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 4, MaxRecvSGE: 4}
	qa, err := pa.CreateQP(vrdma.QPInitAttr{Type: ibv.RC, SendCQ: ca, RecvCQ: ca, Cap: caps})
	if err != nil {
		t.Fatal(err)
	}
	qb, err := pb.CreateQP(vrdma.QPInitAttr{Type: ibv.RC, SendCQ: cb, RecvCQ: cb, Cap: caps})
	if err != nil {
		t.Fatal(err)
	}
	ea, _ := qa.Endpoint(0)
	eb, _ := qb.Endpoint(0)
	if err := qa.Connect(eb, nil); err != nil {
		t.Fatal(err)
	}
	if err := qb.Connect(ea, nil); err != nil {
		t.Fatal(err)
	}
	copy(ma.Bytes(), "hello, rdma")
	if err := qa.PostSend([]vrdma.SendWR{{ID: 7, Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSignaled,
		SGL: []ibv.SGE{ma.SGE(0, 11)}, RemoteAddr: mb.Addr() + 100, RKey: mb.RKey()}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	wc := make([]vrdma.WorkCompletion, 4)
	n, err := ca.PollWait(ctx, wc, 100)
	if err != nil || n != 1 || wc[0].Status != ibv.WCSuccess || wc[0].ID != 7 {
		t.Fatalf("n=%d err=%v wc=%+v", n, err, wc[0])
	}
	if !bytes.Equal(mb.Bytes()[100:111], []byte("hello, rdma")) {
		t.Fatalf("target holds %q", mb.Bytes()[100:111])
	}
	if p, r := qa.Path(); p != "memcpy" || r != "same host" {
		t.Fatalf("path %q %q", p, r)
	}
}
