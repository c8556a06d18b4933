package vrdma_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/ibv"
	"github.com/vrdma/vrdma/internal/daemon"
	"github.com/vrdma/vrdma/internal/daemontest"
	"github.com/vrdma/vrdma/internal/fakelink"
)

// The conformance suite runs every verb against a real in-process daemon:
// two instances ("conf-a" and "conf-b") with one adapter each, so that a
// pair of QPs crosses instances the way two processes on one host would.
//
// Timeouts in these tests only turn a hang into a failure; no test depends
// on how fast anything happens.

const (
	confTimeout = 5 * time.Second

	// Every side registers one region of mrSize bytes with all access, laid
	// out as: bytes to send at srcOff, local destinations (READ, atomics) at
	// dstOff, receive buffers at recvOff, RDMA targets at rdmaOff.
	mrSize  = 32 << 10
	srcOff  = 0
	dstOff  = 8 << 10
	recvOff = 16 << 10
	rdmaOff = 24 << 10

	allAccess = ibv.AccessLocalWrite | ibv.AccessRemoteWrite | ibv.AccessRemoteRead | ibv.AccessRemoteAtomic
	confQKey  = 0x11111111 // DefaultConnectOptions' Q_Key
	grhLen    = 40
)

var confCap = vrdma.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 4, MaxRecvSGE: 4, MaxInlineData: 64}

// confEnv is a daemon with two instances and an opened device on each.
type confEnv struct {
	mode  confMode
	sock  string // conf-a's daemon
	sockB string // conf-b's daemon (the same one unless in a wire mode)
	a, b  *vrdma.Device
}

// confMode is one way the engine can run a request; the suite runs every
// test in each (inEveryMode), as subtests named after the mode.
type confMode struct {
	name    string
	async   bool    // the host's spinning poller instead of workers that sleep on doorbells
	trusted bool    // both instances in one trust group: one-sided requests take the library's direct path
	wire    bool    // two daemons whose hosts an in-process link joins: every request runs the RoCEv2 transport
	mtu     ibv.MTU // the link's MTU, in the wire modes
	gid     int     // the GID index the QPs use: 0 the link-local GID, 1 the first link's IPv4-mapped one
	lids    bool    // the instances are configured for LID routing (InstanceSpec.LIDRouting)
}

// confModes are the suite's modes. "sync" is also what the other tests
// that open the conformance instances (wire, CM, netns) use.
var confModes = []confMode{
	{name: "sync"},
	{name: "async", async: true},
	{name: "trusted", trusted: true},
	{name: "wire", wire: true, mtu: ibv.MTU4096},          // the IPv6 link-local GID, a jumbo link
	{name: "wire4", wire: true, mtu: ibv.MTU1024, gid: 1}, // the IPv4-mapped GID, Ethernet's 1500 bytes
}

// inEveryMode runs f as a subtest for each mode, on a fresh environment of
// that mode: TestConformanceX/async, and so on (go test -run
// 'Conformance/trusted' picks one mode).
func inEveryMode(t *testing.T, f func(t *testing.T, e *confEnv)) {
	for _, m := range confModes {
		t.Run(m.name, func(t *testing.T) { f(t, newConfEnv(t, m)) })
	}
}

// instance is the spec of a conformance instance in mode m.
func (m confMode) instance(name string) vrdma.InstanceSpec {
	spec := vrdma.InstanceSpec{Name: name, Adapters: 1, Async: m.async, LIDRouting: m.lids}
	if m.trusted {
		spec.TrustGroup = "conformance"
	}
	return spec
}

// sockets returns the daemons of the two instances: one daemon, or in the
// wire modes two daemons whose hosts are joined by an in-process link.
func (m confMode) sockets(t *testing.T) [2]string {
	if !m.wire {
		s := daemontest.Start(t)
		return [2]string{s, s}
	}
	w := newWireHosts(t, fakelink.New(1), m.mtu)
	return [2]string{w.daemons[0].SocketPath(), w.daemons[1].SocketPath()}
}

// wireHosts are two daemons whose hosts are joined by in-process links.
type wireHosts struct {
	net     *fakelink.Network
	daemons [2]*daemon.Daemon
	links   [2]*fakelink.Link
	env     *confEnv // the instances on them, once opened
}

func newWireHosts(t testing.TB, n *fakelink.Network, mtu ibv.MTU) *wireHosts {
	w := &wireHosts{net: n}
	for i := range w.daemons {
		d := daemontest.StartDaemon(t)
		l := n.Link("rxe0", [6]byte{0x52, 0x54, 0, 0, 0, byte(i + 1)}, netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)}))
		l.SetMTU(mtu)
		if err := d.AttachLink(l); err != nil {
			t.Fatal(err)
		}
		w.daemons[i], w.links[i] = d, l
	}
	return w
}

// newConfEnv starts the daemons of mode m and opens the suite's instances.
func newConfEnv(t *testing.T, m confMode) *confEnv {
	t.Helper()
	return newConfEnvMode(t, m.sockets(t), m)
}

// newConfEnvOn creates the suite's two instances, conf-a on the daemon of
// socks[0] and conf-b on that of socks[1], and opens their devices.
func newConfEnvOn(t testing.TB, socks [2]string) *confEnv {
	t.Helper()
	return newConfEnvMode(t, socks, confModes[0])
}

// newConfEnvMode is newConfEnvOn with the instances of mode m.
func newConfEnvMode(t testing.TB, socks [2]string, m confMode) *confEnv {
	t.Helper()
	var devs [2]*vrdma.Device
	for i, name := range []string{"conf-a", "conf-b"} {
		o := vrdma.Options{Socket: socks[i]}
		adm, err := vrdma.DialAdmin(o)
		if err != nil {
			t.Fatal(err)
		}
		_, err = adm.CreateInstance(m.instance(name))
		adm.Close()
		if err != nil {
			t.Fatal(err)
		}
		oi := o
		oi.Instance = name
		d, err := vrdma.Open("vrdma0", oi)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		devs[i] = d
	}
	// Move conf-b's QP numbers away from conf-a's, so that a completion's
	// QPNum and SrcQP never coincide by accident.
	x := newSide(t, devs[1], qpSpec{})
	for i := 0; i < 0x40; i++ {
		qp, err := x.pd.CreateQP(vrdma.QPInitAttr{Type: ibv.RC, SendCQ: x.scq, RecvCQ: x.rcq, Cap: confCap})
		if err != nil {
			t.Fatal(err)
		}
		if err := qp.Destroy(); err != nil {
			t.Fatal(err)
		}
	}
	return &confEnv{mode: m, sock: socks[0], sockB: socks[1], a: devs[0], b: devs[1]}
}

// side is one end of a test connection: a QP with its own PD, send and
// receive CQs and a registered region.
type side struct {
	dev      *vrdma.Device
	pd       *vrdma.PD
	scq, rcq *vrdma.CQ
	qp       *vrdma.QP
	mr       *vrdma.MR
	ah       *vrdma.AH // UD: the address handle of the peer
	gid      vrdma.GID
	gidIndex int // the GID index of gid, which its QP connects through
}

// qpSpec describes a side to build; the zero value is an RC QP with confCap.
type qpSpec struct {
	typ    ibv.QPType
	cap    vrdma.QPCap // zero: confCap
	sigAll bool
	pd     *vrdma.PD  // nil: a new PD
	srq    *vrdma.SRQ // receive from this SRQ (pd must be its PD)
	cqe    int        // 0: 256
	access ibv.Access
	gid    int // the GID index to connect through
}

// newSide is newSide with the GID index of e's mode.
func (e *confEnv) newSide(t testing.TB, dev *vrdma.Device, s qpSpec) *side {
	t.Helper()
	s.gid = e.mode.gid
	return newSide(t, dev, s)
}

func newSide(t testing.TB, dev *vrdma.Device, s qpSpec) *side {
	t.Helper()
	if s.typ == 0 {
		s.typ = ibv.RC
	}
	if s.cap == (vrdma.QPCap{}) {
		s.cap = confCap
	}
	if s.cqe == 0 {
		s.cqe = 256
	}
	if s.access == 0 {
		s.access = allAccess
	}
	x := &side{dev: dev, pd: s.pd, gidIndex: s.gid}
	if x.pd == nil {
		pd, err := dev.AllocPD()
		if err != nil {
			t.Fatal(err)
		}
		x.pd = pd
		t.Cleanup(func() { _ = pd.Dealloc() })
	}
	mr, err := x.pd.AllocMR(mrSize, s.access)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mr.Dereg() })
	x.mr = mr
	for _, cq := range []**vrdma.CQ{&x.scq, &x.rcq} {
		c, err := dev.CreateCQ(s.cqe)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Destroy() })
		*cq = c
	}
	qp, err := x.pd.CreateQP(vrdma.QPInitAttr{Type: s.typ, SendCQ: x.scq, RecvCQ: x.rcq, SRQ: s.srq, Cap: s.cap, SigAll: s.sigAll})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = qp.Destroy() })
	x.qp = qp
	if x.gid, err = dev.GID(s.gid); err != nil {
		t.Fatal(err)
	}
	return x
}

func (x *side) endpoint(t *testing.T) vrdma.Endpoint {
	t.Helper()
	ep, err := x.qp.Endpoint(x.gidIndex)
	if err != nil {
		t.Fatal(err)
	}
	return ep
}

// connect takes x and y to RTS, connected to each other (RC, UC), or ready
// to send with an address handle of the other (UD). Nil options are
// DefaultConnectOptions.
func connect(t *testing.T, x, y *side, ox, oy *vrdma.ConnectOptions) {
	t.Helper()
	ox, oy = x.connectOptions(ox), y.connectOptions(oy)
	if err := x.qp.Connect(y.endpoint(t), ox); err != nil {
		t.Fatal(err)
	}
	if err := y.qp.Connect(x.endpoint(t), oy); err != nil {
		t.Fatal(err)
	}
	if x.qp.Type() == ibv.UD {
		x.ah, y.ah = newAH(t, x, y.gid), newAH(t, y, x.gid)
	}
}

// connectOptions returns o (nil: the defaults) with x's GID index.
func (x *side) connectOptions(o *vrdma.ConnectOptions) *vrdma.ConnectOptions {
	c := vrdma.DefaultConnectOptions()
	if o != nil {
		c = *o
	}
	c.GIDIndex = uint8(x.gidIndex)
	return &c
}

func newAH(t *testing.T, x *side, dgid vrdma.GID) *vrdma.AH {
	t.Helper()
	ah, err := x.pd.CreateAH(ibv.AHAttr{DGID: dgid, SGIDIndex: uint8(x.gidIndex), PortNum: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ah.Destroy() })
	return ah
}

// pairSpec describes a connected pair: a on instance conf-a, b on conf-b.
type pairSpec struct {
	typ    ibv.QPType
	cap    vrdma.QPCap
	sigAll bool
	optsA  *vrdma.ConnectOptions
	optsB  *vrdma.ConnectOptions
}

func (e *confEnv) pair(t *testing.T, p pairSpec) (a, b *side) {
	t.Helper()
	a = e.newSide(t, e.a, qpSpec{typ: p.typ, cap: p.cap, sigAll: p.sigAll})
	b = e.newSide(t, e.b, qpSpec{typ: p.typ, cap: p.cap, sigAll: p.sigAll})
	connect(t, a, b, p.optsA, p.optsB)
	return a, b
}

// sendTo addresses a UD work request to y's QP through x's address handle.
func (x *side) sendTo(wr vrdma.SendWR, y *side) vrdma.SendWR {
	wr.AH, wr.RemoteQPN, wr.RemoteQKey = x.ah, y.qp.QPN(), confQKey
	return wr
}

func post(t *testing.T, qp *vrdma.QP, wrs ...vrdma.SendWR) {
	t.Helper()
	if err := qp.PostSend(wrs); err != nil {
		t.Fatalf("post_send: %v", err)
	}
}

func postRecv(t *testing.T, qp *vrdma.QP, wrs ...vrdma.RecvWR) {
	t.Helper()
	if err := qp.PostRecv(wrs); err != nil {
		t.Fatalf("post_recv: %v", err)
	}
}

func recvWR(id uint64, sgl ...ibv.SGE) vrdma.RecvWR { return vrdma.RecvWR{ID: id, SGL: sgl} }

// pollN waits for exactly n completions on cq and returns them in order.
func pollN(t *testing.T, cq *vrdma.CQ, n int) []vrdma.WorkCompletion {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), confTimeout)
	defer cancel()
	out := make([]vrdma.WorkCompletion, 0, n)
	buf := make([]vrdma.WorkCompletion, n)
	for len(out) < n {
		k, err := cq.PollWait(ctx, buf[:n-len(out)], 1000)
		if err != nil {
			t.Fatalf("waiting for %d completions, got %d %+v: %v", n, len(out), out, err)
		}
		out = append(out, buf[:k]...)
	}
	return out
}

func pollOne(t *testing.T, cq *vrdma.CQ) vrdma.WorkCompletion {
	t.Helper()
	return pollN(t, cq, 1)[0]
}

// expectEmpty checks that cq holds no completion. Callers use it only once
// every completion that could precede the one not expected has been polled
// (a QP's completions are produced in order).
func expectEmpty(t *testing.T, cqs ...*vrdma.CQ) {
	t.Helper()
	var wc [4]vrdma.WorkCompletion
	for _, cq := range cqs {
		if n, err := cq.Poll(wc[:]); n != 0 || err != nil {
			t.Fatalf("unexpected completions %+v (err %v)", wc[:n], err)
		}
	}
}

// checkWC compares a completion with the expected one: every field for a
// successful completion; for an error completion the fields ibv_wc defines
// on error (wr_id, status, qp_num).
func checkWC(t *testing.T, got, want vrdma.WorkCompletion) {
	t.Helper()
	if want.Status != ibv.WCSuccess {
		if got.ID != want.ID || got.Status != want.Status || got.QPNum != want.QPNum {
			t.Fatalf("error completion\n got {ID:%d Status:%v QPNum:%#x} (%+v)\nwant {ID:%d Status:%v QPNum:%#x}",
				got.ID, got.Status, got.QPNum, got, want.ID, want.Status, want.QPNum)
		}
		return
	}
	if got != want {
		t.Fatalf("completion\n got %+v (status %v, opcode %v)\nwant %+v (status %v, opcode %v)", got, got.Status, got.Opcode, want, want.Status, want.Opcode)
	}
}

// sendWC is the successful send completion of work request id on x.
func sendWC(x *side, id uint64, op ibv.WCOpcode, n int) vrdma.WorkCompletion {
	return vrdma.WorkCompletion{ID: id, Status: ibv.WCSuccess, Opcode: op, ByteLen: uint32(n), QPNum: x.qp.QPN()}
}

// recvWC is the successful receive completion of id on y of n bytes from x.
func recvWC(y *side, id uint64, n int, from *side) vrdma.WorkCompletion {
	return vrdma.WorkCompletion{ID: id, Status: ibv.WCSuccess, Opcode: ibv.WCRecv, ByteLen: uint32(n), QPNum: y.qp.QPN(), SrcQP: from.qp.QPN()}
}

func withImm(wc vrdma.WorkCompletion, imm uint32) vrdma.WorkCompletion {
	wc.Imm, wc.Flags = imm, wc.Flags|ibv.WCWithImm
	return wc
}

func errWC(x *side, id uint64, st ibv.Status) vrdma.WorkCompletion {
	return vrdma.WorkCompletion{ID: id, Status: st, QPNum: x.qp.QPN()}
}

// fill writes a pattern that differs for every seed and every offset.
func fill(b []byte, seed byte) []byte {
	for i := range b {
		b[i] = seed + byte(i*7) + byte(i>>8)
	}
	return b
}

func pattern(n int, seed byte) []byte { return fill(make([]byte, n), seed) }

func expectBytes(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		t.Fatalf("%s: %d bytes differ from byte %d on (len got %d, want %d)", what, len(got)-i, i, len(got), len(want))
	}
}

func expectZero(t *testing.T, what string, b []byte) {
	t.Helper()
	expectBytes(t, what, b, make([]byte, len(b)))
}

// queryState returns the QP state the daemon holds.
func queryState(t *testing.T, qp *vrdma.QP) ibv.QPState {
	t.Helper()
	a, _, err := qp.Query()
	if err != nil {
		t.Fatal(err)
	}
	return a.State
}

func expectState(t *testing.T, qp *vrdma.QP, want ibv.QPState) {
	t.Helper()
	if got := queryState(t, qp); got != want {
		t.Fatalf("QP 0x%x is in %v, want %v", qp.QPN(), got, want)
	}
	if got := qp.State(); got != want {
		t.Fatalf("QP 0x%x: State() says %v after Query, want %v", qp.QPN(), got, want)
	}
}

// waitEvent reads dev's asynchronous events until one of type typ matches.
func waitEvent(t *testing.T, dev *vrdma.Device, typ ibv.EventType, match func(vrdma.AsyncEvent) bool) vrdma.AsyncEvent {
	t.Helper()
	timer := time.NewTimer(confTimeout)
	defer timer.Stop()
	for {
		select {
		case ev := <-dev.Events():
			if ev.Type == typ && match(ev) {
				return ev
			}
		case <-timer.C:
			t.Fatalf("no %v event", typ)
		}
	}
}

func qpEvent(qp *vrdma.QP) func(vrdma.AsyncEvent) bool {
	return func(ev vrdma.AsyncEvent) bool { return ev.QP == qp }
}

// waitFor polls cond (a daemon query, never a clock) until it holds.
// arrived waits, for a UC RDMA WRITE, until got holds want: a UC request
// completes once it is sent, so across hosts the bytes may land a moment
// after the completion. RC and same-host UC complete after they landed.
func arrived(t *testing.T, typ ibv.QPType, got, want []byte) {
	t.Helper()
	if typ != ibv.UC {
		return
	}
	deadline := time.Now().Add(confTimeout)
	for !bytes.Equal(got, want) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Microsecond)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(confTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Microsecond)
	}
}

func rnrNaks(t *testing.T, dev *vrdma.Device) uint64 {
	t.Helper()
	p, err := dev.QueryPort(1)
	if err != nil {
		t.Fatal(err)
	}
	return p.Counters.RNRNaks
}

// expectPostErr checks that err is a *PostError for request index that
// matches kind.
func expectPostErr(t *testing.T, err error, index int, kind error) {
	t.Helper()
	var pe *vrdma.PostError
	if !errors.As(err, &pe) || pe.Index != index || !errors.Is(err, kind) {
		t.Fatalf("got %v (%T), want a *PostError for request %d matching %v", err, err, index, kind)
	}
}

// word and putWord read and write the host-order (little-endian on every
// platform vrdma runs on) 8-byte words atomics operate on.
func word(b []byte) uint64 { return binary.NativeEndian.Uint64(b) }

func putWord(b []byte, v uint64) { binary.NativeEndian.PutUint64(b, v) }

// wcOpcode is the send completion opcode of a work request opcode
// (ibv_wc_opcode as ibverbs documents it).
func wcOpcode(op ibv.Opcode) ibv.WCOpcode {
	return map[ibv.Opcode]ibv.WCOpcode{
		ibv.WRSend: ibv.WCSend, ibv.WRSendImm: ibv.WCSend,
		ibv.WRRDMAWrite: ibv.WCRDMAWrite, ibv.WRRDMAWriteImm: ibv.WCRDMAWrite,
		ibv.WRRDMARead: ibv.WCRDMARead, ibv.WRAtomicCmpAndSwp: ibv.WCCompSwap, ibv.WRAtomicFetchAndAdd: ibv.WCFetchAdd,
	}[op]
}
