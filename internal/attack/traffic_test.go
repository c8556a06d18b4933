package attack

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/ibv"
	"github.com/vrdma/vrdma/internal/netns"
)

// pair is an RC connection from a QP on host a's default adapter to one on
// host b's, over the TCP channel between their daemons. The test process
// uses both daemons through their sockets.
type pair struct {
	t        *testing.T // for mustWrite, on the test's goroutine
	mra, mrb *vrdma.MR
	cqa      *vrdma.CQ
	qa       *vrdma.QP
	seq      uint64
}

const (
	pairMR    = 1 << 20
	writeSize = 64 << 10
)

// gidIndexOf returns the index of addr's GID in the device's GID table.
func gidIndexOf(t *testing.T, d *vrdma.Device, addr netip.Addr) int {
	t.Helper()
	p, err := d.QueryPort(1)
	if err != nil {
		t.Fatal(err)
	}
	want := addr.As16()
	for i, g := range p.GIDs {
		if [16]byte(g) == want {
			return i
		}
	}
	t.Fatalf("no GID %s in the table %v", addr, p.GIDs)
	return 0
}

type side struct {
	dev *vrdma.Device
	mr  *vrdma.MR
	cq  *vrdma.CQ
	qp  *vrdma.QP
	gid int
}

func openSide(t *testing.T, d *netns.Daemon, h *netns.Host) *side {
	t.Helper()
	return openOn(t, d, "", h.IPv4)
}

// openOn opens vrdma0 of instance ("" = the default) on d, with an RC QP
// and a region, and finds addr's GID.
func openOn(t *testing.T, d *netns.Daemon, instance string, addr netip.Addr) *side {
	t.Helper()
	dev, err := vrdma.Open("vrdma0", vrdma.Options{Socket: d.Socket, Instance: instance})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	pd, err := dev.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	mr, err := pd.AllocMR(pairMR, ibv.AccessLocalWrite|ibv.AccessRemoteWrite|ibv.AccessRemoteRead)
	if err != nil {
		t.Fatal(err)
	}
	cq, err := dev.CreateCQ(64)
	if err != nil {
		t.Fatal(err)
	}
	qp, err := pd.CreateQP(vrdma.QPInitAttr{Type: ibv.RC, SendCQ: cq, RecvCQ: cq,
		Cap: vrdma.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	return &side{dev: dev, mr: mr, cq: cq, qp: qp, gid: gidIndexOf(t, dev, addr)}
}

// newPair connects a QP of a to one of b. No packet has crossed yet: the
// first WRITE makes a's TCP channel connect to b's, if it had no
// connection.
func newPair(t *testing.T, f *scene) *pair {
	t.Helper()
	a, b := openSide(t, f.a, f.ha), openSide(t, f.b, f.hb)
	ea, err := a.qp.Endpoint(a.gid)
	if err != nil {
		t.Fatal(err)
	}
	eb, err := b.qp.Endpoint(b.gid)
	if err != nil {
		t.Fatal(err)
	}
	oa, ob := vrdma.DefaultConnectOptions(), vrdma.DefaultConnectOptions()
	oa.GIDIndex, ob.GIDIndex = uint8(a.gid), uint8(b.gid)
	if err := a.qp.Connect(eb, &oa); err != nil {
		t.Fatal(err)
	}
	if err := b.qp.Connect(ea, &ob); err != nil {
		t.Fatal(err)
	}
	return &pair{t: t, mra: a.mr, mrb: b.mr, cqa: a.cq, qa: a.qp}
}

// write RDMA WRITEs writeSize bytes of a fresh pattern into b's region and
// waits for the completion; it returns how long that took, or why the
// WRITE failed or b's memory does not hold the pattern.
func (p *pair) write(ctx context.Context) (time.Duration, error) {
	p.seq++
	src := p.mra.Bytes()[:writeSize]
	for i := 0; i < len(src); i += 8 {
		binary.LittleEndian.PutUint64(src[i:], p.seq<<20|uint64(i))
	}
	start := time.Now()
	rm := p.mrb.Remote()
	if err := p.qa.PostSend([]vrdma.SendWR{{ID: p.seq, Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSignaled,
		SGL: []ibv.SGE{p.mra.SGE(0, writeSize)}, RemoteAddr: rm.Addr, RKey: rm.RKey}}); err != nil {
		return 0, err
	}
	var wc [1]vrdma.WorkCompletion
	n, err := p.cqa.PollWait(ctx, wc[:], 1000)
	if err != nil || n != 1 {
		return 0, fmt.Errorf("WRITE %d: %d completions, %v", p.seq, n, err)
	}
	if err := wc[0].Err(); err != nil {
		return 0, fmt.Errorf("WRITE %d: %w", p.seq, err)
	}
	took := time.Since(start)
	if !bytes.Equal(p.mrb.Bytes()[:writeSize], src) {
		return 0, fmt.Errorf("WRITE %d completed but b's region does not hold its bytes", p.seq)
	}
	return took, nil
}

// mustWrite is write on the test's goroutine.
func (p *pair) mustWrite(ctx context.Context) time.Duration {
	p.t.Helper()
	d, err := p.write(ctx)
	if err != nil {
		p.t.Fatal(err)
	}
	return d
}

// writeFor writes until d has passed, or a WRITE fails, and returns how
// many WRITEs went through.
func (p *pair) writeFor(ctx context.Context, d time.Duration) (int, error) {
	n := 0
	for end := time.Now().Add(d); time.Now().Before(end); n++ {
		if _, err := p.write(ctx); err != nil {
			return n, err
		}
	}
	return n, nil
}
