package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/ibv"
	"github.com/vrdma/vrdma/internal/daemontest"
	"github.com/vrdma/vrdma/internal/proctest"
)

// A ping responder answers datagrams from anyone who can reach its UD QP
// (its TCP side only writes its hello, and reads nothing). FuzzPingResponder
// sends it the fuzzer's bytes as a datagram, then a ping, and checks that
// it answers exactly the pings among them, in order, stays up, complains
// of nothing and holds no more objects than before.

// pingRig is a responder and a UD QP that sends it datagrams of any size.
type pingRig struct {
	adm     *vrdma.Admin
	r       *pingResponder
	stderr  *proctest.Buffer
	ended   chan error // the responder's serve
	dev     *vrdma.Device
	pd      *vrdma.PD
	mr      *vrdma.MR
	scq     *vrdma.CQ
	rcq     *vrdma.CQ
	qp      *vrdma.QP
	ah      *vrdma.AH
	seq     uint64 // the last probe's
	wc      []vrdma.WorkCompletion
	maxSize int // the largest datagram the path carries
}

const (
	rigSlot  = 8192 // bytes of each of the rig's receive buffers
	rigRecvs = 8
)

func newPingRig(tb testing.TB) *pingRig {
	tb.Helper()
	sock := daemontest.Start(tb)
	adm, err := vrdma.DialAdmin(vrdma.Options{Socket: sock})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { adm.Close() })
	cfg, err := parsePingArgs([]string{"-S", "--socket", sock, "-p", "0"})
	if err != nil {
		tb.Fatal(err)
	}
	p := &pingRig{adm: adm, stderr: &proctest.Buffer{}, ended: make(chan error, 1), wc: make([]vrdma.WorkCompletion, 4)}
	if p.r, err = newPingResponder(cfg, p.stderr); err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { p.ended <- p.r.serve(ctx) }()
	tb.Cleanup(func() {
		cancel()
		select {
		case err := <-p.ended:
			if err != nil {
				tb.Errorf("the responder ended with %v", err)
			}
		case <-time.After(hangGuard):
			tb.Errorf("the responder has not ended %v after it was told to", hangGuard)
		}
	})

	if p.dev, err = vrdma.Open("vrdma0", vrdma.Options{Socket: sock}); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { p.dev.Close() })
	port, err := p.dev.QueryPort(1)
	if err != nil {
		tb.Fatal(err)
	}
	p.maxSize = port.ActiveMTU.Bytes()
	if p.pd, err = p.dev.AllocPD(); err != nil {
		tb.Fatal(err)
	}
	if p.mr, err = p.pd.AllocMR((rigRecvs+1)*rigSlot, ibv.AccessLocalWrite); err != nil {
		tb.Fatal(err)
	}
	if p.scq, err = p.dev.CreateCQ(16); err != nil {
		tb.Fatal(err)
	}
	if p.rcq, err = p.dev.CreateCQ(16); err != nil {
		tb.Fatal(err)
	}
	if p.qp, err = p.pd.CreateQP(vrdma.QPInitAttr{Type: ibv.UD, SendCQ: p.scq, RecvCQ: p.rcq,
		Cap: vrdma.QPCap{MaxSendWR: 4, MaxRecvWR: rigRecvs, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
		tb.Fatal(err)
	}
	o := vrdma.DefaultConnectOptions()
	o.QKey = pingQKey
	if err := p.qp.Connect(vrdma.Endpoint{}, &o); err != nil {
		tb.Fatal(err)
	}
	if p.ah, err = p.pd.CreateAH(ibv.AHAttr{DGID: p.r.u.gid, HopLimit: 64, PortNum: 1}); err != nil {
		tb.Fatal(err)
	}
	for i := range rigRecvs {
		if err := p.repost(uint64(i)); err != nil {
			tb.Fatal(err)
		}
	}
	// A first ping, so that the responder has made its address handle
	// back to the rig before any input counts the daemon's objects.
	p.seq++
	var probe [pingLen]byte
	putPing(probe[:], pingRequest, p.seq, 0)
	p.send(tb, probe[:])
	p.reply(tb)
	return p
}

func (p *pingRig) repost(slot uint64) error {
	return p.qp.PostRecv([]vrdma.RecvWR{{ID: slot, SGL: []ibv.SGE{p.mr.SGE(int(slot)*rigSlot, rigSlot)}}})
}

// send sends b to the responder's QP and waits for the send to complete.
func (p *pingRig) send(t testing.TB, b []byte) {
	t.Helper()
	off := rigRecvs * rigSlot
	n := copy(p.mr.Bytes()[off:], b)
	err := p.qp.PostSend([]vrdma.SendWR{{Opcode: ibv.WRSend, Flags: ibv.SendSignaled, SGL: []ibv.SGE{p.mr.SGE(off, n)},
		AH: p.ah, RemoteQPN: p.r.u.qp.QPN(), RemoteQKey: pingQKey}})
	if err != nil {
		t.Fatalf("sending %d bytes: %v", n, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	if _, err := p.scq.PollWait(ctx, p.wc[:1], 100); err != nil {
		t.Fatalf("sending %d bytes: %v", n, err)
	}
	if err := p.wc[0].Err(); err != nil {
		t.Fatalf("sending %d bytes: %v", n, err)
	}
}

// reply waits for the responder's next datagram and returns it.
func (p *pingRig) reply(t testing.TB) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	if _, err := p.rcq.PollWait(ctx, p.wc[:1], 100); err != nil {
		t.Fatalf("waiting for a reply: %v (the responder's stderr: %q)", err, p.stderr.String())
	}
	w := p.wc[0]
	if err := w.Err(); err != nil {
		t.Fatalf("a reply: %v", err)
	}
	b := p.mr.Bytes()[int(w.ID)*rigSlot:]
	got := bytes.Clone(b[grhLen:w.ByteLen])
	if err := p.repost(w.ID); err != nil {
		t.Fatal(err)
	}
	return got
}

// check sends datagram and a probe ping, and checks the replies.
func (p *pingRig) check(t *testing.T, datagram []byte) {
	before, err := p.adm.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if len(datagram) > p.maxSize {
		datagram = datagram[:p.maxSize]
	}
	p.send(t, datagram)
	p.seq++
	var probe [pingLen]byte
	putPing(probe[:], pingRequest, p.seq, 0x5eed)
	p.send(t, probe[:])

	if kind, seq, ts, ok := parsePing(datagram); ok && kind == pingRequest {
		var want [pingLen]byte
		putPing(want[:], pingReply, seq, ts)
		if got := p.reply(t); !bytes.Equal(got, want[:]) {
			t.Fatalf("the responder answered ping %x with %x; want %x", datagram, got, want)
		}
	}
	var want [pingLen]byte
	putPing(want[:], pingReply, p.seq, 0x5eed)
	if got := p.reply(t); !bytes.Equal(got, want[:]) {
		t.Fatalf("after %q the responder answered the next ping with %x; want %x", datagram, got, want)
	}
	select {
	case err := <-p.ended:
		t.Fatalf("the responder ended with %v after %q", err, datagram)
	default:
	}
	if s := p.stderr.String(); s != "" {
		t.Fatalf("after %q the responder complained: %s", datagram, s)
	}
	if after, err := p.adm.Stats(); err != nil || after != before {
		t.Fatalf("the daemon held %+v before %q and %+v (%v) after it", before, datagram, after, err)
	}
}

func FuzzPingResponder(f *testing.F) {
	p := newPingRig(f)
	var ping, reply [pingLen]byte
	putPing(ping[:], pingRequest, 1, 12345)
	putPing(reply[:], pingReply, 1, 12345)
	for _, s := range [][]byte{
		ping[:], reply[:], ping[:pingLen-1], append(ping[:], 0),
		[]byte("vPNG\x03\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00"),
		bytes.Repeat([]byte("x"), pingSlot-grhLen), bytes.Repeat([]byte("x"), pingSlot-grhLen+1), bytes.Repeat([]byte("x"), 4096),
		{},
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, datagram []byte) {
		p.check(t, datagram)
	})
}
