package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/ibv"
	"github.com/vrdma/vrdma/internal/daemon"
	"github.com/vrdma/vrdma/internal/fakelink"
	"github.com/vrdma/vrdma/internal/perf"
	"github.com/vrdma/vrdma/internal/pki"
)

// runDemo starts a daemon in this process, creates two instances with one
// adapter each and runs every verb between them with checks on the bytes,
// then a short benchmark. It fails unless every check held.
func runDemo(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	secs := fs.Float64("t", 0.5, "seconds per benchmark test (0 skips the benchmark)")
	if err := parse(fs, args); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "vrdma-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	newDaemon := func(name string) (*daemon.Daemon, error) {
		d, err := daemon.New(daemon.Config{SocketPath: filepath.Join(dir, name+".sock"), StateDir: ""})
		if err != nil {
			return nil, err
		}
		go d.Serve()
		return d, nil
	}
	d, err := newDaemon("vrdma")
	if err != nil {
		return err
	}
	defer d.Close()
	fmt.Fprintf(stdout, "daemon: embedded, socket %s\n", d.SocketPath())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := runDemoPass(ctx, stdout, d.SocketPath(), d.SocketPath(), *secs); err != nil {
		return err
	}

	// The same between two hosts: two embedded daemons whose hosts are
	// joined by an in-process link, so every request travels as RoCEv2
	// packets (UDP framing, ICRC checked) through the transport.
	fmt.Fprintf(stdout, "\ntwo hosts: two embedded daemons, each with a link rxe0 on an in-process network (10.0.0.1, 10.0.0.2)\n")
	net := fakelink.New(1)
	var hosts [2]*daemon.Daemon
	for i := range hosts {
		if hosts[i], err = newDaemon(fmt.Sprintf("host%d", i+1)); err != nil {
			return err
		}
		defer hosts[i].Close()
		l := net.Link("rxe0", [6]byte{0x52, 0x54, 0, 0, 0, byte(i + 1)}, netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)}))
		if err := hosts[i].AttachLink(l); err != nil {
			return err
		}
	}
	if err := runDemoPass(ctx, stdout, hosts[0].SocketPath(), hosts[1].SocketPath(), 0); err != nil {
		return err
	}
	s1, s2 := hosts[0].Host().WireStats(""), hosts[1].Host().WireStats("")
	fmt.Fprintf(stdout, "  packets received: %d and %d, every one's ICRC verified (%d failed)\n", s1.RxPackets, s2.RxPackets, s1.ICRC+s2.ICRC)
	return runDemoSwitch(ctx, stdout, dir)
}

// runDemoSwitch runs the checks between two daemons on one distributed
// switch (an etcd embedded in the first) with no RDMA uplink: the switch
// picks the TCP channel, on loopback.
func runDemoSwitch(ctx context.Context, stdout io.Writer, dir string) error {
	fmt.Fprintf(stdout, "\ntwo hosts on one switch: daemon A runs an embedded etcd, daemon B joins it; neither has an RDMA uplink\n")
	// The switch's certificates, as `vrdma switch ca init` and `vrdma host
	// cert` make them: the TCP channel between the two is mutual TLS, and
	// each daemon is the host its certificate names.
	pkiDir := filepath.Join(dir, "pki")
	ca, err := pki.InitCA(pkiDir, daemon.DefaultSwitch)
	if err != nil {
		return err
	}
	var hosts [2]*daemon.Daemon
	for i := range hosts {
		name := fmt.Sprint("demo-host", i+1)
		ip := netip.AddrFrom4([4]byte{127, 0, 0, byte(i + 1)})
		if err := ca.IssueHost(pkiDir, pki.HostSpec{Name: name, IPs: []netip.Addr{ip}}); err != nil {
			return err
		}
		member, err := pki.LoadMember(pkiDir, name)
		if err != nil {
			return err
		}
		sw := daemon.SwitchConfig{Enable: true, HostTag: fmt.Sprint("demo", i+1), TCPListen: net.JoinHostPort(ip.String(), "0"),
			TCPAddrs: []netip.Addr{ip}, Member: member}
		if i > 0 {
			sw.Endpoints = hosts[0].SwitchEndpoints()
		}
		d, err := daemon.New(daemon.Config{SocketPath: filepath.Join(dir, fmt.Sprintf("sw%d.sock", i+1)), HostName: name, Switch: sw})
		if err != nil {
			return err
		}
		go d.Serve()
		defer d.Close()
		hosts[i] = d
	}
	// Each daemon learns the other from the switch a moment after it
	// joins: both views must hold before traffic flows both ways.
	if err := waitPath(ctx, hosts[0].SocketPath(), "demo-host2", "tcp:"); err != nil {
		return err
	}
	if err := waitPath(ctx, hosts[1].SocketPath(), "demo-host1", "tcp:"); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "  the TCP channel between them is mutual TLS under the switch's CA (%s)\n", filepath.Join(pkiDir, pki.CACertFile))
	return runDemoPass(ctx, stdout, hosts[0].SocketPath(), hosts[1].SocketPath(), 0)
}

// waitPath waits until the daemon at sock sees host with a path that
// starts with prefix, and prints it.
func waitPath(ctx context.Context, sock, host, prefix string) error {
	adm, err := vrdma.DialAdmin(vrdma.Options{Socket: sock})
	if err != nil {
		return err
	}
	defer adm.Close()
	for {
		hs, err := adm.Hosts()
		if err != nil {
			return err
		}
		for _, h := range hs {
			if h.Name == host && strings.HasPrefix(h.Path, prefix) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("host %s did not appear on the switch with a %s path: %w", host, prefix, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// runDemoPass runs every check between demo-a (on sockA's daemon) and
// demo-b (on sockB's), then, if secs > 0, a short benchmark.
func runDemoPass(ctx context.Context, stdout io.Writer, sockA, sockB string, secs float64) error {
	dm := &demo{w: stdout}
	defer dm.close()
	if err := dm.setup(sockA, sockB); err != nil {
		return err
	}
	steps := []struct {
		name string
		run  func(context.Context) (string, error)
	}{
		{"SEND", dm.send},
		{"SEND with immediate", dm.sendImm},
		{"RDMA WRITE", dm.write},
		{"RDMA WRITE with immediate", dm.writeImm},
		{"RDMA READ", dm.read},
		{"compare-and-swap", dm.cas},
		{"fetch-and-add", dm.faa},
		{"UD SEND", dm.udSend},
		{"wrong rkey (expected error)", dm.wrongRKey},
	}
	failed := 0
	for _, s := range steps {
		detail, err := s.run(ctx)
		if err != nil {
			failed++
			fmt.Fprintf(stdout, "  FAIL  %-28s %v\n", s.name, err)
			continue
		}
		fmt.Fprintf(stdout, "  ok    %-28s %s\n", s.name, detail)
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d checks failed", failed, len(steps))
	}
	fmt.Fprintf(stdout, "all %d checks held\n", len(steps))
	if secs <= 0 {
		return nil
	}
	return dm.bench(ctx, secs)
}

type end struct {
	dev  *vrdma.Device
	pd   *vrdma.PD
	mr   *vrdma.MR
	cq   *vrdma.CQ
	qp   *vrdma.QP
	wc   []vrdma.WorkCompletion
	inst string
}

type demo struct {
	w     io.Writer
	socks map[string]string // instance -> its daemon's socket
	adms  []*vrdma.Admin    // one per instance, on its daemon
	a, b  *end
	insts []string
}

const demoRegion = 1 << 20

// setup creates instance demo-a on the daemon of sockA and demo-b on that
// of sockB (the same daemon, or two joined by a link) and connects an RC
// QP of each.
func (dm *demo) setup(sockA, sockB string) error {
	dm.socks = map[string]string{"demo-a": sockA, "demo-b": sockB}
	for _, n := range []string{"demo-a", "demo-b"} {
		adm, err := vrdma.DialAdmin(vrdma.Options{Socket: dm.socks[n]})
		if err != nil {
			return err
		}
		dm.adms = append(dm.adms, adm)
		if _, err := adm.CreateInstance(vrdma.InstanceSpec{Name: n, Adapters: 1, Temporary: true}); err != nil {
			return err
		}
		dm.insts = append(dm.insts, n)
	}
	var err error
	if dm.a, err = dm.open("demo-a", ibv.RC); err != nil {
		return err
	}
	if dm.b, err = dm.open("demo-b", ibv.RC); err != nil {
		return err
	}
	if err := connect(dm.a, dm.b, nil); err != nil {
		return err
	}
	path, reason := dm.a.qp.Path()
	fmt.Fprintf(dm.w, "instances demo-a and demo-b: %s (QPN 0x%x) <-> %s (QPN 0x%x), RC, path %s: %s\n",
		dm.a.dev.Name(), dm.a.qp.QPN(), dm.b.dev.Name(), dm.b.qp.QPN(), path, reason)
	return nil
}

func (dm *demo) open(instance string, typ ibv.QPType) (*end, error) {
	dev, err := vrdma.Open("vrdma0", vrdma.Options{Socket: dm.socks[instance], Instance: instance, Client: "vrdma demo"})
	if err != nil {
		return nil, err
	}
	e := &end{dev: dev, inst: instance, wc: make([]vrdma.WorkCompletion, 16)}
	if e.pd, err = dev.AllocPD(); err != nil {
		return nil, err
	}
	if e.mr, err = e.pd.AllocMR(demoRegion, ibv.AccessLocalWrite|ibv.AccessRemoteWrite|ibv.AccessRemoteRead|ibv.AccessRemoteAtomic); err != nil {
		return nil, err
	}
	if e.cq, err = dev.CreateCQ(64); err != nil {
		return nil, err
	}
	e.qp, err = e.pd.CreateQP(vrdma.QPInitAttr{Type: typ, SendCQ: e.cq, RecvCQ: e.cq,
		Cap: vrdma.QPCap{MaxSendWR: 32, MaxRecvWR: 32, MaxSendSGE: 4, MaxRecvSGE: 4}})
	return e, err
}

func connect(a, b *end, o *vrdma.ConnectOptions) error {
	ea, err := a.qp.Endpoint(0)
	if err != nil {
		return err
	}
	eb, err := b.qp.Endpoint(0)
	if err != nil {
		return err
	}
	if err := a.qp.Connect(eb, o); err != nil {
		return err
	}
	return b.qp.Connect(ea, o)
}

func (dm *demo) close() {
	for _, e := range []*end{dm.a, dm.b} {
		if e != nil {
			e.dev.Close()
		}
	}
	for i, adm := range dm.adms {
		if i < len(dm.insts) {
			_ = adm.DeleteInstance(dm.insts[i])
		}
		adm.Close()
	}
}

// await polls e's CQ for one completion and checks its opcode and status.
func (e *end) await(ctx context.Context, op ibv.WCOpcode) (vrdma.WorkCompletion, error) {
	n, err := e.cq.PollWait(ctx, e.wc[:1], 1000)
	if err != nil {
		return vrdma.WorkCompletion{}, err
	}
	if n != 1 {
		return vrdma.WorkCompletion{}, fmt.Errorf("polled %d completions, wanted 1", n)
	}
	wc := e.wc[0]
	if err := wc.Err(); err != nil {
		return wc, err
	}
	if wc.Opcode != op {
		return wc, fmt.Errorf("completion opcode %v, wanted %v", wc.Opcode, op)
	}
	return wc, nil
}

func fill(b []byte, seed byte) {
	for i := range b {
		b[i] = seed + byte(i*7)
	}
}

func (dm *demo) path() string {
	p, r := dm.a.qp.Path()
	return p + ": " + r
}

func (dm *demo) sendCommon(ctx context.Context, op ibv.Opcode, n int, imm uint32) (string, error) {
	a, b := dm.a, dm.b
	src, dst := a.mr.Bytes()[:n], b.mr.Bytes()[:n]
	fill(src, byte(op)+1)
	clear(dst)
	if err := b.qp.PostRecv([]vrdma.RecvWR{{ID: 100, SGL: []ibv.SGE{b.mr.SGE(0, n)}}}); err != nil {
		return "", err
	}
	if err := a.qp.PostSend([]vrdma.SendWR{{ID: 1, Opcode: op, Flags: ibv.SendSignaled, Imm: imm, SGL: []ibv.SGE{a.mr.SGE(0, n)}}}); err != nil {
		return "", err
	}
	if _, err := a.await(ctx, ibv.WCSend); err != nil {
		return "", err
	}
	wc, err := b.await(ctx, ibv.WCRecv)
	if err != nil {
		return "", err
	}
	if wc.ByteLen != uint32(n) || wc.ID != 100 || wc.SrcQP != a.qp.QPN() {
		return "", fmt.Errorf("receive completion %+v", wc)
	}
	if op == ibv.WRSendImm && (wc.Flags&ibv.WCWithImm == 0 || wc.Imm != imm) {
		return "", fmt.Errorf("immediate: flags %v imm 0x%x, wanted 0x%x", wc.Flags, wc.Imm, imm)
	}
	if !bytes.Equal(src, dst) {
		return "", errors.New("received bytes differ from those sent")
	}
	extra := ""
	if imm != 0 {
		extra = fmt.Sprintf(", imm 0x%x", imm)
	}
	return fmt.Sprintf("%d bytes delivered and checked%s (%s)", n, extra, dm.path()), nil
}

func (dm *demo) send(ctx context.Context) (string, error) {
	return dm.sendCommon(ctx, ibv.WRSend, 4096, 0)
}

func (dm *demo) sendImm(ctx context.Context) (string, error) {
	return dm.sendCommon(ctx, ibv.WRSendImm, 512, 0xC0FFEE)
}

func (dm *demo) write(ctx context.Context) (string, error) {
	a, b := dm.a, dm.b
	const n = 64 << 10
	src := a.mr.Bytes()[:n]
	fill(src, 3)
	clear(b.mr.Bytes()[4096 : 4096+n])
	wr := vrdma.SendWR{ID: 2, Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSignaled,
		SGL: []ibv.SGE{a.mr.SGE(0, n/2), a.mr.SGE(n/2, n/2)}, RemoteAddr: b.mr.Addr() + 4096, RKey: b.mr.RKey()}
	if err := a.qp.PostSend([]vrdma.SendWR{wr}); err != nil {
		return "", err
	}
	if _, err := a.await(ctx, ibv.WCRDMAWrite); err != nil {
		return "", err
	}
	if !bytes.Equal(src, b.mr.Bytes()[4096:4096+n]) {
		return "", errors.New("target region differs from the source")
	}
	return fmt.Sprintf("%d bytes from 2 SGEs into the remote region, checked (%s)", n, dm.path()), nil
}

func (dm *demo) writeImm(ctx context.Context) (string, error) {
	a, b := dm.a, dm.b
	const n = 8192
	fill(a.mr.Bytes()[:n], 9)
	if err := b.qp.PostRecv([]vrdma.RecvWR{{ID: 101}}); err != nil {
		return "", err
	}
	wr := vrdma.SendWR{ID: 3, Opcode: ibv.WRRDMAWriteImm, Flags: ibv.SendSignaled, Imm: 0xABCD,
		SGL: []ibv.SGE{a.mr.SGE(0, n)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()}
	if err := a.qp.PostSend([]vrdma.SendWR{wr}); err != nil {
		return "", err
	}
	if _, err := a.await(ctx, ibv.WCRDMAWrite); err != nil {
		return "", err
	}
	wc, err := b.await(ctx, ibv.WCRecvRDMAImm)
	if err != nil {
		return "", err
	}
	if wc.Imm != 0xABCD || wc.ByteLen != n {
		return "", fmt.Errorf("receive completion imm 0x%x len %d", wc.Imm, wc.ByteLen)
	}
	if !bytes.Equal(a.mr.Bytes()[:n], b.mr.Bytes()[:n]) {
		return "", errors.New("target region differs from the source")
	}
	return fmt.Sprintf("%d bytes written, receiver got imm 0x%x (%s)", n, wc.Imm, dm.path()), nil
}

func (dm *demo) read(ctx context.Context) (string, error) {
	a, b := dm.a, dm.b
	const n = 32 << 10
	fill(b.mr.Bytes()[:n], 42)
	dst := a.mr.Bytes()[8192 : 8192+n]
	clear(dst)
	wr := vrdma.SendWR{ID: 4, Opcode: ibv.WRRDMARead, Flags: ibv.SendSignaled,
		SGL: []ibv.SGE{a.mr.SGE(8192, n)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()}
	if err := a.qp.PostSend([]vrdma.SendWR{wr}); err != nil {
		return "", err
	}
	wc, err := a.await(ctx, ibv.WCRDMARead)
	if err != nil {
		return "", err
	}
	if wc.ByteLen != n || !bytes.Equal(dst, b.mr.Bytes()[:n]) {
		return "", errors.New("bytes read differ from the remote region")
	}
	return fmt.Sprintf("%d bytes read from the remote region, checked (%s)", n, dm.path()), nil
}

func (dm *demo) atomic(ctx context.Context, op ibv.Opcode, compareAdd, swap, before, wantOrig, wantAfter uint64) (string, error) {
	a, b := dm.a, dm.b
	word := b.mr.Bytes()[1024:1032]
	if op == ibv.WRAtomicCmpAndSwp {
		binary.LittleEndian.PutUint64(word, before)
	}
	res := a.mr.Bytes()[2048:2056]
	clear(res)
	wr := vrdma.SendWR{ID: 5, Opcode: op, Flags: ibv.SendSignaled, SGL: []ibv.SGE{a.mr.SGE(2048, 8)},
		RemoteAddr: b.mr.Addr() + 1024, RKey: b.mr.RKey(), CompareAdd: compareAdd, Swap: swap}
	if err := a.qp.PostSend([]vrdma.SendWR{wr}); err != nil {
		return "", err
	}
	wcop := ibv.WCCompSwap
	if op == ibv.WRAtomicFetchAndAdd {
		wcop = ibv.WCFetchAdd
	}
	if _, err := a.await(ctx, wcop); err != nil {
		return "", err
	}
	orig, after := binary.LittleEndian.Uint64(res), binary.LittleEndian.Uint64(word)
	if orig != wantOrig || after != wantAfter {
		return "", fmt.Errorf("original %d (want %d), remote now %d (want %d)", orig, wantOrig, after, wantAfter)
	}
	return fmt.Sprintf("original value %d returned, remote word now %d (%s)", orig, after, dm.path()), nil
}

func (dm *demo) cas(ctx context.Context) (string, error) {
	return dm.atomic(ctx, ibv.WRAtomicCmpAndSwp, 42, 99, 42, 42, 99)
}

func (dm *demo) faa(ctx context.Context) (string, error) {
	return dm.atomic(ctx, ibv.WRAtomicFetchAndAdd, 5, 0, 0, 99, 104)
}

// openPair opens a fresh QP of type typ on each instance and connects them;
// closing the two devices releases everything.
func (dm *demo) openPair(typ ibv.QPType) (a, b *end, err error) {
	if a, err = dm.open("demo-a", typ); err != nil {
		return nil, nil, err
	}
	if b, err = dm.open("demo-b", typ); err != nil {
		a.dev.Close()
		return nil, nil, err
	}
	if err = connect(a, b, nil); err != nil {
		a.dev.Close()
		b.dev.Close()
		return nil, nil, err
	}
	return a, b, nil
}

func (dm *demo) udSend(ctx context.Context) (string, error) {
	a, b, err := dm.openPair(ibv.UD)
	if err != nil {
		return "", err
	}
	defer a.dev.Close()
	defer b.dev.Close()
	gid, _ := b.dev.GID(0)
	ah, err := a.pd.CreateAH(ibv.AHAttr{DGID: gid})
	if err != nil {
		return "", err
	}
	const n = 1024
	fill(a.mr.Bytes()[:n], 77)
	before, err := a.dev.QueryPort(1)
	if err != nil {
		return "", err
	}
	if err := b.qp.PostRecv([]vrdma.RecvWR{{ID: 9, SGL: []ibv.SGE{b.mr.SGE(0, n+40)}}}); err != nil {
		return "", err
	}
	wr := vrdma.SendWR{ID: 6, Opcode: ibv.WRSend, Flags: ibv.SendSignaled, SGL: []ibv.SGE{a.mr.SGE(0, n)},
		AH: ah, RemoteQPN: b.qp.QPN(), RemoteQKey: vrdma.DefaultConnectOptions().QKey}
	if err := a.qp.PostSend([]vrdma.SendWR{wr}); err != nil {
		return "", err
	}
	if _, err := a.await(ctx, ibv.WCSend); err != nil {
		return "", err
	}
	wc, err := b.await(ctx, ibv.WCRecv)
	if err != nil {
		return "", err
	}
	if wc.ByteLen != n+40 || wc.Flags&ibv.WCWithGRH == 0 || wc.SrcQP != a.qp.QPN() {
		return "", fmt.Errorf("UD receive completion %+v", wc)
	}
	if !bytes.Equal(a.mr.Bytes()[:n], b.mr.Bytes()[40:40+n]) {
		return "", errors.New("datagram bytes differ")
	}
	after, err := a.dev.QueryPort(1)
	if err != nil {
		return "", err
	}
	via := "the path counters did not move"
	switch c0, c1 := before.Counters, after.Counters; {
	case c1.PathMemcpy > c0.PathMemcpy:
		via = "memcpy: same host"
	case c1.PathRDMA > c0.PathRDMA:
		via = "rdma: a RoCEv2 datagram"
	case c1.PathTCP > c0.PathTCP:
		via = "tcp: a datagram over the TCP channel"
	}
	return fmt.Sprintf("%d bytes after the 40-byte GRH, from QPN 0x%x, checked (%s)", n, wc.SrcQP, via), nil
}

func (dm *demo) wrongRKey(ctx context.Context) (string, error) {
	a, b, err := dm.openPair(ibv.RC)
	if err != nil {
		return "", err
	}
	defer a.dev.Close()
	defer b.dev.Close()
	fill(b.mr.Bytes()[:4096], 5)
	before := append([]byte(nil), b.mr.Bytes()[:4096]...)
	wr := vrdma.SendWR{ID: 7, Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSignaled, SGL: []ibv.SGE{a.mr.SGE(0, 4096)},
		RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey() ^ 0x5a}
	if err := a.qp.PostSend([]vrdma.SendWR{wr}); err != nil {
		return "", err
	}
	_, err = a.await(ctx, ibv.WCRDMAWrite)
	var wce *vrdma.WCError
	if !errors.As(err, &wce) || wce.Status != ibv.WCRemAccessErr {
		return "", fmt.Errorf("completion error %v, wanted REM_ACCESS_ERR", err)
	}
	select {
	case ev := <-b.dev.Events():
		if ev.Type != ibv.EventQPAccessErr {
			return "", fmt.Errorf("responder event %v, wanted QP_ACCESS_ERR", ev.Type)
		}
	case <-ctx.Done():
		return "", errors.New("the responder got no QP_ACCESS_ERR event")
	}
	if !bytes.Equal(before, b.mr.Bytes()[:4096]) {
		return "", errors.New("the target memory changed")
	}
	if _, _, err := a.qp.Query(); err != nil || a.qp.State() != ibv.QPSErr {
		return "", fmt.Errorf("requester QP state %v, wanted ERR", a.qp.State())
	}
	return fmt.Sprintf("completion %v, QP in %v, responder event QP_ACCESS_ERR, target memory untouched", wce.Status, a.qp.State()), nil
}

func (dm *demo) bench(ctx context.Context, secs float64) error {
	fmt.Fprintf(dm.w, "\nbenchmark (vrdma perf --loopback, %.1f s per test, this process and the daemon sharing the CPUs):\n", secs)
	fmt.Fprintf(dm.w, "  %-20s %10s %14s %14s %12s\n", "test", "msg_size", "bandwidth", "latency", "msg_rate")
	cfg := perf.Config{
		Tests:    []string{"rc_lat", "rc_rdma_write_lat", "rc_bw", "rc_rdma_write_bw", "rc_rdma_read_bw"},
		Duration: time.Duration(secs * float64(time.Second)),
		A:        vrdma.Options{Socket: dm.socks["demo-a"], Instance: "demo-a"},
		B:        vrdma.Options{Socket: dm.socks["demo-b"], Instance: "demo-b"},
	}
	return perf.Run(ctx, cfg, func(r perf.Result) error {
		bw, lat := "-", "-"
		if r.BW > 0 {
			bw = fmt.Sprintf("%.2f GB/s", r.BW/1e9)
		}
		if r.LatencyUS > 0 {
			lat = fmt.Sprintf("%.2f us", r.LatencyUS)
		}
		fmt.Fprintf(dm.w, "  %-20s %10d %14s %14s %10.0f/s\n", r.Test, r.MsgSize, bw, lat, r.MsgRate)
		return nil
	})
}
