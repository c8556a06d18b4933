package tcplink_test

// Two daemons in one process joined by TCP channels, plain and TLS: RC and
// UD work over the public verbs API exactly as over RoCEv2, and packets
// that reach no QP are counted by the receiving engine, as are packets that
// fail the ICRC over plain TCP (over TLS the engine does not check it:
// Link.FramesIntact).

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/ibv"
	"github.com/vrdma/vrdma/internal/admit"
	"github.com/vrdma/vrdma/internal/daemon"
	"github.com/vrdma/vrdma/internal/daemontest"
	"github.com/vrdma/vrdma/internal/pki/pkitest"
	"github.com/vrdma/vrdma/internal/tcplink"
	"github.com/vrdma/vrdma/internal/wire"
)

const (
	e2eTimeout = 20 * time.Second
	mrSize     = 64 << 10
	allAccess  = ibv.AccessLocalWrite | ibv.AccessRemoteWrite | ibv.AccessRemoteRead | ibv.AccessRemoteAtomic
	qkey       = 0x11111111
	// GID index 1 is the IPv4 GID: the links have a MAC, so index 0 is
	// its fe80:: GID.
	gidIndex = 1
)

// host is a daemon with a TCP channel attached and an instance on it.
type host struct {
	d    *daemon.Daemon
	link *tcplink.Link
	dev  *vrdma.Device
	addr netip.Addr
}

// peerTable maps GID addresses to TCP endpoints, as the switch will.
type peerTable struct {
	mu sync.Mutex
	m  map[netip.Addr]string
}

func (p *peerTable) lookup(a netip.Addr) (admit.Endpoint, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ep, ok := p.m[a]
	return admit.Endpoint{Addr: ep}, ok
}

func (p *peerTable) set(a netip.Addr, ep string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.m[a] = ep
}

// startHost starts daemon i with a TCP channel on 127.0.0.i, under TLS
// with a certificate ca issues if ca is not nil.
func startHost(t testing.TB, peers *peerTable, i int, ca *pkitest.CA) *host {
	t.Helper()
	h := &host{d: daemontest.StartDaemon(t), addr: netip.AddrFrom4([4]byte{10, 47, 0, byte(i)})}
	listen := netip.AddrFrom4([4]byte{127, 0, 0, byte(i)})
	l, err := tcplink.Open(tcplink.Config{
		Name:   "tcp0",
		Addrs:  []netip.Addr{h.addr},
		MAC:    net.HardwareAddr{0x52, 0x54, 0, 0, 0x47, byte(i)},
		Listen: listen.String() + ":0",
		Peers:  peers.lookup,
		TLS:    daemonTLS(t, ca, listen),
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	peers.set(h.addr, l.ListenAddr().String())
	if err := h.d.AttachLink(l); err != nil {
		t.Fatal(err)
	}
	h.link = l
	o := vrdma.Options{Socket: h.d.SocketPath()}
	adm, err := vrdma.DialAdmin(o)
	if err != nil {
		t.Fatal(err)
	}
	_, err = adm.CreateInstance(vrdma.InstanceSpec{Name: "vm", Adapters: 1})
	adm.Close()
	if err != nil {
		t.Fatal(err)
	}
	o.Instance = "vm"
	if h.dev, err = vrdma.Open("vrdma0", o); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.dev.Close() })
	g, err := h.dev.GID(gidIndex)
	if err != nil {
		t.Fatal(err)
	}
	if want := h.addr.As16(); g != vrdma.GID(want) {
		t.Fatalf("GID %d is %v, want the link's IPv4 GID %v", gidIndex, netip.AddrFrom16(g), netip.AddrFrom16(want))
	}
	return h
}

// end is a QP with its CQ and a registered region.
type end struct {
	qp *vrdma.QP
	cq *vrdma.CQ
	mr *vrdma.MR
	pd *vrdma.PD
}

func newEnd(t testing.TB, h *host, typ ibv.QPType) *end {
	t.Helper()
	pd, err := h.dev.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pd.Dealloc() })
	mr, err := pd.AllocMR(mrSize, allAccess)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mr.Dereg() })
	cq, err := h.dev.CreateCQ(256)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cq.Destroy() })
	qp, err := pd.CreateQP(vrdma.QPInitAttr{Type: typ, SendCQ: cq, RecvCQ: cq,
		Cap: vrdma.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 2, MaxRecvSGE: 2}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = qp.Destroy() })
	return &end{qp: qp, cq: cq, mr: mr, pd: pd}
}

// connect takes x and y to RTS, connected to each other over the IPv4 GIDs.
func connect(t testing.TB, x, y *end) {
	t.Helper()
	o := vrdma.DefaultConnectOptions()
	o.GIDIndex, o.QKey = gidIndex, qkey
	ex, err := x.qp.Endpoint(gidIndex)
	if err != nil {
		t.Fatal(err)
	}
	ey, err := y.qp.Endpoint(gidIndex)
	if err != nil {
		t.Fatal(err)
	}
	if err := x.qp.Connect(ey, &o); err != nil {
		t.Fatal(err)
	}
	if err := y.qp.Connect(ex, &o); err != nil {
		t.Fatal(err)
	}
}

func (x *end) post(t testing.TB, wr vrdma.SendWR) {
	t.Helper()
	wr.Flags |= ibv.SendSignaled
	if err := x.qp.PostSend([]vrdma.SendWR{wr}); err != nil {
		t.Fatal(err)
	}
}

func (x *end) recv(t testing.TB, id uint64, off, n int) {
	t.Helper()
	if err := x.qp.PostRecv([]vrdma.RecvWR{{ID: id, SGL: []ibv.SGE{x.mr.SGE(off, n)}}}); err != nil {
		t.Fatal(err)
	}
}

// complete waits for the next completion and checks its ID, opcode and
// length and that it succeeded.
func (x *end) complete(t testing.TB, id uint64, op ibv.WCOpcode, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), e2eTimeout)
	defer cancel()
	var wc [1]vrdma.WorkCompletion
	if _, err := x.cq.PollWait(ctx, wc[:], 100); err != nil {
		t.Fatalf("waiting for completion %d: %v", id, err)
	}
	if w := wc[0]; w.Status != ibv.WCSuccess || w.ID != id || w.Opcode != op || int(w.ByteLen) != n {
		t.Fatalf("completion %+v (status %v), want ID %d, opcode %v, %d bytes, success", w, w.Status, id, op, n)
	}
}

func pattern(b []byte, seed byte) []byte {
	for i := range b {
		b[i] = seed + byte(i*7) + byte(i>>8)
	}
	return b
}

func expectBytes(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		i := 0
		for i < len(got) && got[i] == want[i] {
			i++
		}
		t.Fatalf("%s: the bytes differ from byte %d on", what, i)
	}
}

// Region layout of every end: source at 0, local destinations at 16 KiB,
// receive buffers at 32 KiB, RDMA targets at 48 KiB.
const (
	srcOff, dstOff, recvOff, rdmaOff = 0, 16 << 10, 32 << 10, 48 << 10
	msgLen                           = 10000 // several packets at a 4096-byte MTU
)

// daemonTLS is the mutual TLS config of a daemon listening on ip under
// ca; nil if ca is.
func daemonTLS(t testing.TB, ca *pkitest.CA, ip netip.Addr) *tls.Config {
	if ca == nil {
		return nil
	}
	return ca.Mutual(t, "vrdma daemon "+ip.String(), ip.String())
}

func TestDaemonsOverTCP(t *testing.T) {
	t.Run("plain", func(t *testing.T) { testDaemons(t, nil) })
	t.Run("TLS", func(t *testing.T) { testDaemons(t, pkitest.NewCA(t, "vrdma test CA")) })
}

func testDaemons(t *testing.T, ca *pkitest.CA) {
	peers := &peerTable{m: make(map[netip.Addr]string)}
	ha := startHost(t, peers, 1, ca)
	hb := startHost(t, peers, 2, ca)

	t.Run("RC", func(t *testing.T) {
		a, b := newEnd(t, ha, ibv.RC), newEnd(t, hb, ibv.RC)
		connect(t, a, b)
		am, bm := a.mr.Bytes(), b.mr.Bytes()
		for round := range 20 {
			seed := byte(round)
			// SEND
			src := pattern(am[srcOff:srcOff+msgLen], seed)
			b.recv(t, uint64(round), recvOff, msgLen)
			a.post(t, vrdma.SendWR{ID: 1, Opcode: ibv.WRSend, SGL: []ibv.SGE{a.mr.SGE(srcOff, msgLen)}})
			a.complete(t, 1, ibv.WCSend, msgLen)
			b.complete(t, uint64(round), ibv.WCRecv, msgLen)
			expectBytes(t, "SEND", bm[recvOff:recvOff+msgLen], src)
			// RDMA WRITE
			src = pattern(am[srcOff:srcOff+msgLen], seed+50)
			a.post(t, vrdma.SendWR{ID: 2, Opcode: ibv.WRRDMAWrite, SGL: []ibv.SGE{a.mr.SGE(srcOff, msgLen)},
				RemoteAddr: b.mr.Addr() + rdmaOff, RKey: b.mr.RKey()})
			a.complete(t, 2, ibv.WCRDMAWrite, msgLen)
			expectBytes(t, "WRITE", bm[rdmaOff:rdmaOff+msgLen], src)
			// RDMA READ
			remote := pattern(bm[rdmaOff:rdmaOff+msgLen], seed+100)
			a.post(t, vrdma.SendWR{ID: 3, Opcode: ibv.WRRDMARead, SGL: []ibv.SGE{a.mr.SGE(dstOff, msgLen)},
				RemoteAddr: b.mr.Addr() + rdmaOff, RKey: b.mr.RKey()})
			a.complete(t, 3, ibv.WCRDMARead, msgLen)
			expectBytes(t, "READ", am[dstOff:dstOff+msgLen], remote)
			// Fetch-and-add on a counter that counts the rounds.
			counter := bm[mrSize-8:]
			if round == 0 {
				binary.NativeEndian.PutUint64(counter, 1000)
			}
			a.post(t, vrdma.SendWR{ID: 4, Opcode: ibv.WRAtomicFetchAndAdd, SGL: []ibv.SGE{a.mr.SGE(dstOff, 8)},
				RemoteAddr: b.mr.Addr() + mrSize - 8, RKey: b.mr.RKey(), CompareAdd: 1})
			a.complete(t, 4, ibv.WCFetchAdd, 8)
			if got := binary.NativeEndian.Uint64(am[dstOff:]); got != uint64(1000+round) {
				t.Fatalf("round %d: FetchAdd returned %d, want %d", round, got, 1000+round)
			}
			// Compare-and-swap: moves a word from round to round+1.
			if round == 0 {
				binary.NativeEndian.PutUint64(bm[mrSize-16:], 0)
			}
			a.post(t, vrdma.SendWR{ID: 5, Opcode: ibv.WRAtomicCmpAndSwp, SGL: []ibv.SGE{a.mr.SGE(dstOff+8, 8)},
				RemoteAddr: b.mr.Addr() + mrSize - 16, RKey: b.mr.RKey(), CompareAdd: uint64(round), Swap: uint64(round + 1)})
			a.complete(t, 5, ibv.WCCompSwap, 8)
			if got := binary.NativeEndian.Uint64(am[dstOff+8:]); got != uint64(round) {
				t.Fatalf("round %d: CmpSwap found %d", round, got)
			}
			// ATOMIC WRITE: the round's word, stored whole.
			v := 0x0102030405060708 * uint64(round+1)
			a.post(t, vrdma.SendWR{ID: 6, Opcode: ibv.WRAtomicWrite, RemoteAddr: b.mr.Addr() + mrSize - 24, RKey: b.mr.RKey(), CompareAdd: v})
			a.complete(t, 6, ibv.WCAtomicWrite, 8)
			if got := binary.NativeEndian.Uint64(bm[mrSize-24:]); got != v {
				t.Fatalf("round %d: ATOMIC WRITE left %#x, want %#x", round, got, v)
			}
		}
		if got := binary.NativeEndian.Uint64(bm[mrSize-8:]); got != 1020 {
			t.Fatalf("the counter is %d after 20 FetchAdds from 1000", got)
		}
		if got := binary.NativeEndian.Uint64(bm[mrSize-16:]); got != 20 {
			t.Fatalf("the CmpSwap word is %d after 20 swaps", got)
		}
	})

	t.Run("UD", func(t *testing.T) {
		a, b := newEnd(t, ha, ibv.UD), newEnd(t, hb, ibv.UD)
		connect(t, a, b)
		ah, err := a.pd.CreateAH(ibv.AHAttr{DGID: hb.addr.As16(), SGIDIndex: gidIndex, PortNum: 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ah.Destroy() })
		const n, grh = 1000, 40
		for i := range uint64(10) {
			src := pattern(a.mr.Bytes()[srcOff:srcOff+n], byte(i))
			b.recv(t, i, recvOff, grh+n)
			a.post(t, vrdma.SendWR{ID: i, Opcode: ibv.WRSend, SGL: []ibv.SGE{a.mr.SGE(srcOff, n)},
				AH: ah, RemoteQPN: b.qp.QPN(), RemoteQKey: qkey})
			a.complete(t, i, ibv.WCSend, n)
			b.complete(t, i, ibv.WCRecv, grh+n)
			expectBytes(t, "UD SEND", b.mr.Bytes()[recvOff+grh:recvOff+grh+n], src)
		}
	})

	// A third daemon's link sends B a packet for a QP that does not exist
	// and one with a corrupted byte: B's engine counts both and drops them —
	// the second as an ICRC error over plain TCP; over TLS, whose AEAD
	// vouches for every byte from the peer's engine, the ICRC is not
	// checked and it too reaches no QP.
	t.Run("bad packets", func(t *testing.T) {
		probeAddr := netip.MustParseAddr("10.47.0.3")
		probe, err := tcplink.Open(tcplink.Config{Name: "probe", Addrs: []netip.Addr{probeAddr}, Listen: "127.0.0.3:0",
			Peers: peers.lookup, TLS: daemonTLS(t, ca, netip.MustParseAddr("127.0.0.3")), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		defer probe.Close()
		go func() { _ = probe.Serve(func([]byte) {}) }()
		p := wire.Packet{Src: probeAddr, Dst: hb.addr, TTL: 64, IPID: 1, SrcPort: 0xc000,
			Opcode: wire.TransportRC | wire.OpSendOnly, PKey: wire.DefaultPKey, DestQP: 0xabcdef, Payload: []byte("who is there?")}
		unknown := wire.Append(nil, &p)
		corrupt := bytes.Clone(unknown)
		corrupt[len(corrupt)-10] ^= 0x40
		before := hb.d.Host().WireStats("")
		if n, err := probe.WriteBatch([][]byte{unknown, corrupt}); n != 2 || err != nil {
			t.Fatalf("WriteBatch = %d, %v", n, err)
		}
		deadline := time.Now().Add(e2eTimeout)
		for {
			s := hb.d.Host().WireStats("")
			if ca == nil && s.UnknownQP == before.UnknownQP+1 && s.ICRC == before.ICRC+1 ||
				ca != nil && s.UnknownQP == before.UnknownQP+2 && s.ICRC == before.ICRC {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("B's engine counted %+v, before %+v: want one more unknown QP and one more ICRC error over plain TCP, two more unknown QPs over TLS", s, before)
			}
			time.Sleep(time.Millisecond)
		}
	})

	sa, sb := ha.link.Stats(), hb.link.Stats()
	t.Logf("A: %+v", sa)
	t.Logf("B: %+v", sb)
	if sa.ProtocolErrors+sb.ProtocolErrors+sa.HandshakeErrors+sb.HandshakeErrors != 0 {
		t.Fatal("protocol or handshake errors between two good daemons")
	}
}

// BenchmarkRCWrite runs signaled RDMA WRITEs one at a time between two
// daemons over their TCP channels: each op is one WRITE from post to
// completion, so small sizes measure latency and large ones throughput.
func BenchmarkRCWrite(b *testing.B) {
	for _, size := range []int{64, 4096, 16 << 10} {
		b.Run(sizeName(size), func(b *testing.B) {
			peers := &peerTable{m: make(map[netip.Addr]string)}
			ha := startHost(b, peers, 1, nil)
			hb := startHost(b, peers, 2, nil)
			x, y := newEnd(b, ha, ibv.RC), newEnd(b, hb, ibv.RC)
			connect(b, x, y)
			wr := vrdma.SendWR{ID: 1, Opcode: ibv.WRRDMAWrite, SGL: []ibv.SGE{x.mr.SGE(srcOff, size)},
				RemoteAddr: y.mr.Addr() + rdmaOff, RKey: y.mr.RKey()}
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				x.post(b, wr)
				x.complete(b, 1, ibv.WCRDMAWrite, size)
			}
		})
	}
}

func sizeName(n int) string {
	if n >= 1024 {
		return strconv.Itoa(n>>10) + "KiB"
	}
	return strconv.Itoa(n) + "B"
}
