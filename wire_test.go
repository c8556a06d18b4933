package vrdma_test

// RC, UC and UD between two hosts over the RoCEv2 transport, through an
// in-process network that loses, duplicates, reorders, corrupts and
// delays frames; bad packets from a third party; a peer that disappears.
// (internal/itest runs the same between network namespaces over veth.)

import (
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/ibv"
	"github.com/vrdma/vrdma/internal/fakelink"
	"github.com/vrdma/vrdma/internal/wire"
)

// wirePair is an RC (or UC, UD) pair across two hosts joined by n, using
// the IPv4 GIDs (index 1), with a short ACK timeout so that losses are
// repaired quickly.
func wirePair(t *testing.T, w *wireHosts, typ ibv.QPType) (a, b *side) {
	return wirePairRetry(t, w, typ, 7)
}

// wirePairRetry is wirePair with retry_cnt retry (7: for ever, as rxe reads it).
func wirePairRetry(t *testing.T, w *wireHosts, typ ibv.QPType, retry uint8) (a, b *side) {
	t.Helper()
	return hostPair(t, w.open(t), typ, 1, retry)
}

// hostPair connects a QP of e.a's device to one of e.b's through GID gid.
func hostPair(t testing.TB, e *confEnv, typ ibv.QPType, gid int, retry uint8) (a, b *side) {
	t.Helper()
	a = newSide(t, e.a, qpSpec{typ: typ})
	b = newSide(t, e.b, qpSpec{typ: typ})
	o := vrdma.DefaultConnectOptions()
	o.GIDIndex, o.Timeout, o.MinRNRTimer, o.RetryCnt = uint8(gid), 8, 1, retry // ~1 ms ACK timeout, 10 µs RNR
	var err error
	if a.gid, err = e.a.GID(gid); err != nil {
		t.Fatal(err)
	}
	if b.gid, err = e.b.GID(gid); err != nil {
		t.Fatal(err)
	}
	ea, _ := a.qp.Endpoint(gid)
	eb, _ := b.qp.Endpoint(gid)
	if err := a.qp.Connect(eb, &o); err != nil {
		t.Fatal(err)
	}
	if err := b.qp.Connect(ea, &o); err != nil {
		t.Fatal(err)
	}
	if typ == ibv.UD {
		a.ah = newAHIndex(t, a, b.gid, uint8(gid))
		b.ah = newAHIndex(t, b, a.gid, uint8(gid))
	}
	return a, b
}

// open creates the conformance instances on w's daemons once.
func (w *wireHosts) open(t testing.TB) *confEnv {
	if w.env == nil {
		w.env = newConfEnvOn(t, [2]string{w.daemons[0].SocketPath(), w.daemons[1].SocketPath()})
	}
	return w.env
}

func newAHIndex(t testing.TB, x *side, dgid vrdma.GID, sgid uint8) *vrdma.AH {
	t.Helper()
	ah, err := x.pd.CreateAH(ibv.AHAttr{DGID: dgid, SGIDIndex: sgid, PortNum: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ah.Destroy() })
	return ah
}

// rcWorkload runs every RC operation (SEND with immediate, WRITE, READ,
// FetchAdd, CmpSwap, WRITE with immediate) rounds times, one at a time, and
// checks each completed once with the right bytes and every atomic ran once.
func rcWorkload(t *testing.T, a, b *side, rounds int) {
	t.Helper()
	const n = 3000 // three packets at an MTU of 1024
	counter := b.mr.Bytes()[rdmaOff+8192-8:]
	putWord(counter, 0)
	putWord(b.mr.Bytes()[rdmaOff+8192-16:], 0)
	for i := 0; i < rounds; i++ {
		seed := byte(i)
		src := fill(a.mr.Bytes()[srcOff:srcOff+n], seed)
		postRecv(t, b.qp, recvWR(uint64(i), b.mr.SGE(recvOff, n)))
		post(t, a.qp, vrdma.SendWR{ID: 1, Opcode: ibv.WRSendImm, Imm: uint32(i), Flags: ibv.SendSignaled, SGL: []ibv.SGE{a.mr.SGE(srcOff, n)}})
		checkWC(t, pollOne(t, a.scq), sendWC(a, 1, ibv.WCSend, n))
		checkWC(t, pollOne(t, b.rcq), withImm(recvWC(b, uint64(i), n, a), uint32(i)))
		expectBytes(t, "SEND", b.mr.Bytes()[recvOff:recvOff+n], src)

		src = fill(a.mr.Bytes()[srcOff:srcOff+n], seed+50)
		post(t, a.qp, vrdma.SendWR{ID: 2, Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSignaled, SGL: []ibv.SGE{a.mr.SGE(srcOff, n)},
			RemoteAddr: b.mr.Addr() + rdmaOff, RKey: b.mr.RKey()})
		checkWC(t, pollOne(t, a.scq), sendWC(a, 2, ibv.WCRDMAWrite, n))
		expectBytes(t, "WRITE", b.mr.Bytes()[rdmaOff:rdmaOff+n], src)

		remote := fill(b.mr.Bytes()[rdmaOff+4096:rdmaOff+4096+n], seed+100)
		post(t, a.qp, vrdma.SendWR{ID: 3, Opcode: ibv.WRRDMARead, Flags: ibv.SendSignaled, SGL: []ibv.SGE{a.mr.SGE(dstOff, n)},
			RemoteAddr: b.mr.Addr() + rdmaOff + 4096, RKey: b.mr.RKey()})
		checkWC(t, pollOne(t, a.scq), sendWC(a, 3, ibv.WCRDMARead, n))
		expectBytes(t, "READ", a.mr.Bytes()[dstOff:dstOff+n], remote)

		post(t, a.qp, vrdma.SendWR{ID: 4, Opcode: ibv.WRAtomicFetchAndAdd, Flags: ibv.SendSignaled, SGL: []ibv.SGE{a.mr.SGE(dstOff+n+5, 8)},
			RemoteAddr: b.mr.Addr() + rdmaOff + 8192 - 8, RKey: b.mr.RKey(), CompareAdd: 1})
		checkWC(t, pollOne(t, a.scq), sendWC(a, 4, ibv.WCFetchAdd, 8))
		if got := word(a.mr.Bytes()[dstOff+n+5:]); got != uint64(i) {
			t.Fatalf("round %d: FetchAdd returned %d: an atomic ran twice or not at all", i, got)
		}

		// CmpSwap moves a second word from i to i+1: it succeeds once per round.
		post(t, a.qp, vrdma.SendWR{ID: 5, Opcode: ibv.WRAtomicCmpAndSwp, Flags: ibv.SendSignaled, SGL: []ibv.SGE{a.mr.SGE(dstOff+n+13, 8)},
			RemoteAddr: b.mr.Addr() + rdmaOff + 8192 - 16, RKey: b.mr.RKey(), CompareAdd: uint64(i), Swap: uint64(i + 1)})
		checkWC(t, pollOne(t, a.scq), sendWC(a, 5, ibv.WCCompSwap, 8))
		if got := word(a.mr.Bytes()[dstOff+n+13:]); got != uint64(i) {
			t.Fatalf("round %d: CmpSwap found %d", i, got)
		}

		// WRITE with immediate: the bytes, then a receive with the immediate.
		src = fill(a.mr.Bytes()[srcOff:srcOff+n], seed+150)
		postRecv(t, b.qp, recvWR(uint64(1000+i), b.mr.SGE(recvOff, 0)))
		post(t, a.qp, vrdma.SendWR{ID: 6, Opcode: ibv.WRRDMAWriteImm, Imm: uint32(0x100 + i), Flags: ibv.SendSignaled, SGL: []ibv.SGE{a.mr.SGE(srcOff, n)},
			RemoteAddr: b.mr.Addr() + rdmaOff, RKey: b.mr.RKey()})
		checkWC(t, pollOne(t, a.scq), sendWC(a, 6, ibv.WCRDMAWrite, n))
		wi := withImm(recvWC(b, uint64(1000+i), n, a), uint32(0x100+i))
		wi.Opcode = ibv.WCRecvRDMAImm
		checkWC(t, pollOne(t, b.rcq), wi)
		expectBytes(t, "WRITE with immediate", b.mr.Bytes()[rdmaOff:rdmaOff+n], src)
	}
	if got := word(counter); got != uint64(rounds) {
		t.Fatalf("the counter is %d after %d FetchAdds", got, rounds)
	}
	expectEmpty(t, a.scq, a.rcq, b.scq, b.rcq)
}

func TestWireFaults(t *testing.T) {
	cases := []struct {
		name   string
		faults fakelink.Faults
	}{
		{"clean", fakelink.Faults{}},
		{"loss 1%", fakelink.Faults{Loss: 0.01}},
		{"loss 5%", fakelink.Faults{Loss: 0.05}},
		{"reordering", fakelink.Faults{Reorder: 0.1}},
		{"duplication", fakelink.Faults{Duplicate: 0.1}},
		{"corruption", fakelink.Faults{Corrupt: 0.05}},
		{"delay", fakelink.Faults{Delay: 200 * time.Microsecond}},
		{"everything", fakelink.Faults{Loss: 0.02, Duplicate: 0.05, Reorder: 0.05, Corrupt: 0.02}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := newWireHosts(t, fakelink.New(int64(i+1)), ibv.MTU1024)
			w.net.SetFaults(c.faults)
			a, b := wirePair(t, w, ibv.RC)
			rcWorkload(t, a, b, 25)
			expectState(t, a.qp, ibv.QPSRTS)
			expectState(t, b.qp, ibv.QPSRTS)
			icrc := w.daemons[0].Host().WireStats("").ICRC + w.daemons[1].Host().WireStats("").ICRC
			if c.faults.Corrupt > 0 && w.net.Corrupted.Load() > 0 && icrc == 0 {
				t.Fatalf("%d frames were corrupted and no ICRC error was counted", w.net.Corrupted.Load())
			}
			if c.faults.Corrupt == 0 && icrc != 0 {
				t.Fatalf("%d ICRC errors without corruption", icrc)
			}
			pa, err := w.env.a.QueryPort(1)
			if err != nil {
				t.Fatal(err)
			}
			pb, err := w.env.b.QueryPort(1)
			if err != nil {
				t.Fatal(err)
			}
			ca, cb := pa.Counters, pb.Counters
			resent := ca.ResentPackets + cb.ResentPackets
			if retries := ca.AckTimeouts + cb.AckTimeouts + ca.SeqNAKs + cb.SeqNAKs + ca.ImpliedNAKs + cb.ImpliedNAKs; (retries == 0) != (resent == 0) {
				t.Fatalf("%d go-back-Ns but %d packets sent again", retries, resent)
			}
			t.Logf("lost %d, duplicated %d, reordered %d, corrupted %d; ICRC drops %d; go-back-Ns: timeouts %d, sequence NAKs %d, implied %d; %d packets sent again",
				w.net.Lost.Load(), w.net.Duplicated.Load(), w.net.Reordered.Load(), w.net.Corrupted.Load(), icrc,
				ca.AckTimeouts+cb.AckTimeouts, ca.SeqNAKs+cb.SeqNAKs, ca.ImpliedNAKs+cb.ImpliedNAKs, resent)
		})
	}
}

// UC and UD over a clean wire: every message arrives.
func TestWireUCUD(t *testing.T) {
	w := newWireHosts(t, fakelink.New(1), ibv.MTU1024)
	w.open(t) // the instances live as long as the test, not a subtest
	t.Run("UC", func(t *testing.T) {
		a, b := wirePair(t, w, ibv.UC)
		for i := uint64(0); i < 10; i++ {
			src := fill(a.mr.Bytes()[srcOff:srcOff+2500], byte(i))
			postRecv(t, b.qp, recvWR(i, b.mr.SGE(recvOff, 2500)))
			post(t, a.qp, vrdma.SendWR{ID: i, Opcode: ibv.WRSend, Flags: ibv.SendSignaled, SGL: []ibv.SGE{a.mr.SGE(srcOff, 2500)}})
			checkWC(t, pollOne(t, a.scq), sendWC(a, i, ibv.WCSend, 2500))
			checkWC(t, pollOne(t, b.rcq), recvWC(b, i, 2500, a))
			expectBytes(t, "UC SEND", b.mr.Bytes()[recvOff:recvOff+2500], src)
		}
	})
	t.Run("UD", func(t *testing.T) {
		a, b := wirePair(t, w, ibv.UD)
		for i := uint64(0); i < 10; i++ {
			src := fill(a.mr.Bytes()[srcOff:srcOff+1000], byte(i))
			postRecv(t, b.qp, recvWR(i, b.mr.SGE(recvOff, grhLen+1000)))
			post(t, a.qp, a.sendTo(vrdma.SendWR{ID: i, Opcode: ibv.WRSend, Flags: ibv.SendSignaled, SGL: []ibv.SGE{a.mr.SGE(srcOff, 1000)}}, b))
			checkWC(t, pollOne(t, a.scq), sendWC(a, i, ibv.WCSend, 1000))
			want := recvWC(b, i, grhLen+1000, a)
			want.Flags = ibv.WCWithGRH
			checkWC(t, pollOne(t, b.rcq), want)
			checkGRH(t, b.mr.Bytes()[recvOff:recvOff+grhLen], a.gid, b.gid)
			expectBytes(t, "UD SEND", b.mr.Bytes()[recvOff+grhLen:recvOff+grhLen+1000], src)
		}
	})
}

// A peer whose host disappears: the requester gives up after retry_cnt
// retries with RETRY_EXC_ERR, never hangs.
func TestWirePeerGone(t *testing.T) {
	w := newWireHosts(t, fakelink.New(1), ibv.MTU1024)
	a, b := wirePairRetry(t, w, ibv.RC, 3)
	rcWorkload(t, a, b, 1)
	w.links[1].Close()
	post(t, a.qp, vrdma.SendWR{ID: 9, Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSignaled, SGL: []ibv.SGE{a.mr.SGE(srcOff, 100)},
		RemoteAddr: b.mr.Addr() + rdmaOff, RKey: b.mr.RKey()})
	// timeout 8 (~1 ms) and retry_cnt 3: four attempts, well inside pollOne's limit.
	checkWC(t, pollOne(t, a.scq), errWC(a, 9, ibv.WCRetryExcErr))
	expectState(t, a.qp, ibv.QPSErr)
}

// Packets from a third party that are malformed or do not match: each is
// dropped (or NAKed, as IBTA says) and counted, and the hosts go on working.
func TestWireBadInput(t *testing.T) {
	w := newWireHosts(t, fakelink.New(1), ibv.MTU1024)
	a, b := wirePair(t, w, ibv.RC)
	ua, ub := wirePair(t, w, ibv.UD)
	evil := w.net.Link("evil", [6]byte{2, 0, 0, 0, 0, 9}, netip.MustParseAddr("10.0.0.9"))
	hb := w.daemons[1].Host()
	ea, _ := a.qp.Endpoint(1)
	// A packet that looks as if a's QP sent it to b's.
	fromA := func(p wire.Packet) []byte {
		p.Src, p.Dst = netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
		p.TTL, p.DF, p.IPID, p.SrcPort, p.DstPort = 64, true, 1, 0xc000, 4791
		if p.PKey == 0 {
			p.PKey = 0xffff
		}
		if p.DestQP == 0 {
			p.DestQP = b.qp.QPN()
		}
		return wire.Append(nil, &p)
	}
	send := func(frames ...[]byte) {
		if _, err := evil.WriteBatch(frames); err != nil {
			t.Fatal(err)
		}
	}
	counter := func(name string) uint64 {
		switch name {
		case "malformed":
			return hb.WireStats("rxe0").Malformed
		case "icrc":
			return hb.WireStats("rxe0").ICRC
		case "unknown QP":
			return hb.WireStats("rxe0").UnknownQP
		case "P_Key":
			return hb.WireStats("rxe0").BadKey
		case "not ours":
			return hb.WireStats("rxe0").NotOurs
		}
		t.Fatalf("no counter %q", name)
		return 0
	}
	writeOnly := wire.Packet{Opcode: wire.TransportRC | wire.OpWriteOnly, PSN: ea.PSN, AckReq: true,
		RETH: wire.RETH{VA: b.mr.Addr() + rdmaOff, RKey: b.mr.RKey(), Length: 8}, Payload: make([]byte, 8)}
	good := fromA(writeOnly)
	cases := []struct {
		name    string
		frame   []byte
		counter string
	}{
		{"truncated", good[:40], "malformed"},
		{"IP and UDP only", good[:28], "malformed"},
		{"BTH version 1", func() []byte { p := writeOnly; p.TVer = 1; return fromA(p) }(), "malformed"},
		{"unknown opcode", func() []byte { f := append([]byte(nil), good...); f[28] = 0x1f; return f }(), "malformed"},
		{"bad ICRC", func() []byte { f := append([]byte(nil), good...); f[len(f)-1] ^= 1; return f }(), "icrc"},
		{"payload bit flipped", func() []byte { f := append([]byte(nil), good...); f[len(f)-6] ^= 0x10; return f }(), "icrc"},
		{"unknown QPN", func() []byte { p := writeOnly; p.DestQP = 0xabcdef; return fromA(p) }(), "unknown QP"},
		{"QP1 (no GSI)", func() []byte { p := writeOnly; p.DestQP = 1; return fromA(p) }(), "unknown QP"},
		{"UD opcode to an RC QP", func() []byte {
			p := wire.Packet{Opcode: wire.TransportUD | wire.OpSendOnly, DETH: wire.DETH{QKey: confQKey, SrcQP: 5}, Payload: make([]byte, 4)}
			return fromA(p)
		}(), "unknown QP"},
		{"wrong source address", func() []byte {
			p := writeOnly
			p.Src, p.Dst = netip.MustParseAddr("10.0.0.9"), netip.MustParseAddr("10.0.0.2")
			p.PKey, p.DestQP, p.SrcPort, p.DstPort, p.TTL = 0xffff, b.qp.QPN(), 1, 4791, 64
			return wire.Append(nil, &p)
		}(), "unknown QP"},
		{"wrong P_Key", func() []byte { p := writeOnly; p.PKey = 0x1234; return fromA(p) }(), "P_Key"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := counter(c.counter)
			send(c.frame)
			waitFor(t, c.name+" counted", func() bool { return counter(c.counter) > before })
		})
	}
	t.Run("UD wrong Q_Key", func(t *testing.T) {
		before := rxDrops(t, ub.dev)
		p := wire.Packet{Opcode: wire.TransportUD | wire.OpSendOnly, DestQP: ub.qp.QPN(), DETH: wire.DETH{QKey: 0x999, SrcQP: ua.qp.QPN()}, Payload: make([]byte, 4)}
		send(fromA(p))
		waitFor(t, "the Q_Key drop counted", func() bool { return rxDrops(t, ub.dev) > before })
	})
	// The hosts still work after all that.
	rcWorkload(t, a, b, 2)

	t.Run("bad rkey is NAKed and fails the responder", func(t *testing.T) {
		// In sequence (the PSN b expects next) but with a wrong rkey: IBTA's
		// remote access error: NAK, and b's QP goes to ERR.
		x, y := wirePair(t, w, ibv.RC)
		ex, _ := x.qp.Endpoint(1)
		p := writeOnly
		p.PSN, p.DestQP, p.RETH.RKey = ex.PSN, y.qp.QPN(), y.mr.RKey()^0x100
		send(fromA(p))
		waitEvent(t, y.dev, ibv.EventQPAccessErr, qpEvent(y.qp))
		expectState(t, y.qp, ibv.QPSErr)
	})
	t.Run("length beyond the region is NAKed", func(t *testing.T) {
		x, y := wirePair(t, w, ibv.RC)
		ex, _ := x.qp.Endpoint(1)
		p := writeOnly
		p.PSN, p.DestQP = ex.PSN, y.qp.QPN()
		p.RETH.VA = y.mr.Addr() + mrSize - 4
		send(fromA(p))
		waitEvent(t, y.dev, ibv.EventQPAccessErr, qpEvent(y.qp))
	})
}

func rxDrops(t *testing.T, dev *vrdma.Device) uint64 {
	t.Helper()
	p, err := dev.QueryPort(1)
	if err != nil {
		t.Fatal(err)
	}
	return p.Counters.RxDrops
}

// After hosts, QPs and traffic with losses are gone, so are their goroutines.
func TestWireNoGoroutineLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	t.Run("traffic", func(t *testing.T) {
		w := newWireHosts(t, fakelink.New(7), ibv.MTU1024)
		w.net.SetFaults(fakelink.Faults{Loss: 0.05})
		a, b := wirePairRetry(t, w, ibv.RC, 6)
		rcWorkload(t, a, b, 5)
		w.links[1].Close()
		post(t, a.qp, vrdma.SendWR{ID: 9, Opcode: ibv.WRSend, Flags: ibv.SendSignaled, SGL: []ibv.SGE{a.mr.SGE(srcOff, 100)}})
		checkWC(t, pollOne(t, a.scq), errWC(a, 9, ibv.WCRetryExcErr))
	})
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines before, %d after:\n%s", before, n, buf[:runtime.Stack(buf, true)])
	}
}
