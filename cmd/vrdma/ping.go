package main

// vrdma ping: what ibping does, over the verbs instead of MADs. A responder
// (ping -S) owns a UD QP and tells each TCP client where it is with a hello
// line (QPN, Q_Key, GID, host name; oob.go). The client then sends UD
// datagrams of a sequence number and a timestamp; the responder echoes each
// one to the QPN of its work completion and the source GID of its GRH.
// A reply that does not come within -w seconds counts as lost.

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/ibv"
)

const (
	pingPort  = 18516      // the responder's TCP rendezvous (ibv_rc_pingpong has 18515)
	pingQKey  = 0x11111111 // the responder's Q_Key, told in its hello
	pingSlot  = 512        // bytes per buffer: the 40-byte GRH, then a datagram
	pingRecvs = 64         // receives kept posted; their IDs are their slots
	pingSends = 16         // sends in flight; IDs pingRecvs + slot
	pingLen   = 24         // "vPNG", kind, 3 zero bytes, sequence, timestamp
	grhLen    = 40
)

// Datagram kinds, the fifth byte.
const (
	pingRequest = 1
	pingReply   = 2
)

// pingConfig is a ping's command line.
type pingConfig struct {
	vopts   vrdma.Options
	server  bool
	host    string
	port    int
	dev     string
	gidIdx  int
	count   int // 0: until interrupted
	flood   bool
	timeout time.Duration
}

func runPing(args []string, stdout, stderr io.Writer) error {
	cfg, err := parsePingArgs(args)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if !cfg.server {
		return pingClient(ctx, cfg, stdout)
	}
	r, err := newPingResponder(cfg, stderr)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "vrdma ping responder on %s: GID %s QPN 0x%06x, rendezvous on TCP port %d\n",
		r.u.dev.Name(), gidText(r.u.gid), r.u.qp.QPN(), r.ln.Addr().(*net.TCPAddr).Port)
	return r.serve(ctx)
}

func parsePingArgs(args []string) (*pingConfig, error) {
	fs := flag.NewFlagSet("ping", flag.ContinueOnError)
	o := clientFlags(fs)
	server := fs.Bool("S", false, "run a responder")
	count := fs.Int("c", 0, "stop after `COUNT` pings (default: until interrupted)")
	flood := fs.Bool("f", false, "flood: send each ping as soon as the last one is answered or lost, not a second later")
	wait := fs.Float64("w", 1, "`SECONDS` to wait for each reply before counting it lost")
	dev := fs.String("d", "", "the `DEVICE` to use (default: the first)")
	gid := fs.Int("g", 0, "the GID index (`IDX`) of the source GID (client) or of the GID to tell clients (responder)")
	port := fs.Int("p", pingPort, "the responder's TCP `PORT`")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: vrdma ping -S [-d DEVICE] [-g IDX] [-p PORT]\n       vrdma ping [-c COUNT] [-f] [-w SECONDS] [-d DEVICE] [-g IDX] [-p PORT] HOST\n\n")
		fs.PrintDefaults()
	}
	var operands []string
	for { // options may follow HOST
		if err := parse(fs, args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			break
		}
		operands = append(operands, fs.Arg(0))
		args = fs.Args()[1:]
	}
	o.Client = "vrdma ping"
	cfg := &pingConfig{vopts: *o, server: *server, port: *port, dev: *dev, gidIdx: *gid, count: *count, flood: *flood,
		timeout: time.Duration(*wait * float64(time.Second))}
	switch {
	case cfg.server && len(operands) > 0:
		return nil, usagef("a responder (-S) takes no HOST, got %q", operands)
	case !cfg.server && len(operands) != 1:
		return nil, usagef("give one HOST to ping (or -S to run a responder), got %q", operands)
	case *count < 0:
		return nil, usagef("-c %d: give a count of 1 or more, or leave it out to ping until interrupted", *count)
	case !(*wait > 0 && *wait <= 3600):
		return nil, usagef("-w %g: give 0 < seconds ≤ 3600", *wait)
	case *port < 0 || *port > 65535:
		return nil, usagef("-p %d: a TCP port is 0..65535", *port)
	case *gid < 0 || *gid > math.MaxUint8:
		return nil, usagef("-g %d: a GID index is 0..255 (`vrdma devinfo -v` lists them)", *gid)
	}
	if len(operands) == 1 {
		cfg.host = operands[0]
	}
	return cfg, nil
}

// udEnd is a UD QP with its receive and send buffers, as both the
// responder and the client use it.
type udEnd struct {
	dev  *vrdma.Device
	pd   *vrdma.PD
	mr   *vrdma.MR
	cq   *vrdma.CQ
	qp   *vrdma.QP
	gid  vrdma.GID
	sgid uint8 // its index
	qkey uint32
	ahs  map[vrdma.GID]*vrdma.AH // by destination

	next     int // the send slot to use next
	inflight int // sends not yet completed
	send     []vrdma.SendWR
}

// openUD opens the device and makes a UD QP ready to send and receive with
// Q_Key qkey, every receive posted.
func openUD(cfg *pingConfig, qkey uint32) (*udEnd, error) {
	dev, err := openDevice(cfg.dev, cfg.vopts)
	if err != nil {
		return nil, err
	}
	u := &udEnd{dev: dev, sgid: uint8(cfg.gidIdx), qkey: qkey, ahs: map[vrdma.GID]*vrdma.AH{}, send: make([]vrdma.SendWR, 1)}
	if err := u.init(cfg.gidIdx); err != nil {
		dev.Close() // the daemon releases what was made
		return nil, err
	}
	return u, nil
}

func (u *udEnd) init(gidIdx int) error {
	var err error
	if u.gid, err = u.dev.GID(gidIdx); err != nil {
		return fmt.Errorf("GID index %d: %w (`vrdma devinfo -v` lists the GIDs)", gidIdx, err)
	}
	if u.pd, err = u.dev.AllocPD(); err != nil {
		return err
	}
	if u.mr, err = u.pd.AllocMR((pingRecvs+pingSends)*pingSlot, ibv.AccessLocalWrite); err != nil {
		return err
	}
	if u.cq, err = u.dev.CreateCQ(pingRecvs + pingSends); err != nil {
		return err
	}
	u.qp, err = u.pd.CreateQP(vrdma.QPInitAttr{Type: ibv.UD, SendCQ: u.cq, RecvCQ: u.cq,
		Cap: vrdma.QPCap{MaxSendWR: pingSends, MaxRecvWR: pingRecvs, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		return err
	}
	o := vrdma.DefaultConnectOptions()
	o.QKey = u.qkey
	if err := u.qp.Connect(vrdma.Endpoint{}, &o); err != nil {
		return err
	}
	for slot := range pingRecvs {
		if err := u.repost(uint64(slot)); err != nil {
			return err
		}
	}
	return nil
}

func (u *udEnd) close() error {
	err := errors.Join(u.qp.Destroy(), u.cq.Destroy(), u.mr.Dereg(), u.dropAHs(), u.pd.Dealloc())
	return errors.Join(err, u.dev.Close())
}

// ah returns an address handle for gid, keeping up to 256 of them.
func (u *udEnd) ah(gid vrdma.GID) (*vrdma.AH, error) {
	if ah := u.ahs[gid]; ah != nil {
		return ah, nil
	}
	if len(u.ahs) >= 256 {
		if err := u.dropAHs(); err != nil {
			return nil, err
		}
	}
	ah, err := u.pd.CreateAH(ibv.AHAttr{DGID: gid, SGIDIndex: u.sgid, HopLimit: 64, PortNum: 1})
	if err != nil {
		return nil, err
	}
	u.ahs[gid] = ah
	return ah, nil
}

func (u *udEnd) dropAHs() error {
	var err error
	for g, ah := range u.ahs {
		err = errors.Join(err, ah.Destroy())
		delete(u.ahs, g)
	}
	return err
}

// repost gives receive slot id back to the QP.
func (u *udEnd) repost(id uint64) error {
	return u.qp.PostRecv([]vrdma.RecvWR{{ID: id, SGL: []ibv.SGE{u.mr.SGE(int(id)*pingSlot, pingSlot)}}})
}

var errSendsBusy = errors.New("every send buffer is in flight")

// sendTo sends b to QP qpn behind ah with Q_Key qkey.
func (u *udEnd) sendTo(ah *vrdma.AH, qpn, qkey uint32, b []byte) error {
	if u.inflight == pingSends {
		return errSendsBusy
	}
	slot := pingRecvs + u.next
	u.next = (u.next + 1) % pingSends
	n := copy(u.mr.Bytes()[slot*pingSlot:(slot+1)*pingSlot], b)
	u.send[0] = vrdma.SendWR{ID: uint64(slot), Opcode: ibv.WRSend, Flags: ibv.SendSignaled,
		SGL: []ibv.SGE{u.mr.SGE(slot*pingSlot, n)}, AH: ah, RemoteQPN: qpn, RemoteQKey: qkey}
	if err := u.qp.PostSend(u.send); err != nil {
		return err
	}
	u.inflight++
	return nil
}

// datagram returns what a successful receive completion brought: the bytes
// after the GRH and the sender's GID from it.
func (u *udEnd) datagram(wc *vrdma.WorkCompletion) ([]byte, vrdma.GID) {
	var sgid vrdma.GID
	b := u.mr.Bytes()[int(wc.ID)*pingSlot : int(wc.ID)*pingSlot+pingSlot]
	if wc.Flags&ibv.WCWithGRH == 0 || wc.ByteLen < grhLen || int(wc.ByteLen) > len(b) {
		return nil, sgid
	}
	copy(sgid[:], b[8:24])
	return b[grhLen:wc.ByteLen], sgid
}

// putPing writes a datagram of kind with seq and timestamp ts into b.
func putPing(b []byte, kind byte, seq, ts uint64) {
	copy(b, "vPNG")
	b[4], b[5], b[6], b[7] = kind, 0, 0, 0
	binary.BigEndian.PutUint64(b[8:], seq)
	binary.BigEndian.PutUint64(b[16:], ts)
}

// parsePing reads a datagram; ok is false for anything that is not one.
func parsePing(b []byte) (kind byte, seq, ts uint64, ok bool) {
	if len(b) != pingLen || string(b[:4]) != "vPNG" || b[5]|b[6]|b[7] != 0 {
		return 0, 0, 0, false
	}
	return b[4], binary.BigEndian.Uint64(b[8:]), binary.BigEndian.Uint64(b[16:]), true
}

// pingResponder answers pings: a UD QP and a TCP listener for hellos.
type pingResponder struct {
	u      *udEnd
	ln     net.Listener
	hello  []byte
	stderr io.Writer
}

// newPingResponder makes the QP and listens on cfg.port of every address.
func newPingResponder(cfg *pingConfig, stderr io.Writer) (*pingResponder, error) {
	u, err := openUD(cfg, pingQKey)
	if err != nil {
		return nil, err
	}
	ln, err := listenTCP(cfg.port, "-p")
	if err != nil {
		u.close()
		return nil, err
	}
	host, _ := os.Hostname()
	r := &pingResponder{u: u, ln: ln, stderr: stderr}
	r.hello = appendPingHello(nil, pingPeer{QPN: u.qp.QPN(), QKey: pingQKey, GID: u.gid, Host: host})
	return r, nil
}

// serve answers until ctx ends, then releases everything.
func (r *pingResponder) serve(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { r.ln.Close() })
	defer stop()
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.greet()
	}()
	err := r.answer(ctx)
	r.ln.Close()
	<-done
	return errors.Join(err, r.u.close())
}

// greet writes the hello to every TCP client until the listener closes.
func (r *pingResponder) greet() {
	for {
		conn, err := r.ln.Accept()
		if err != nil {
			return
		}
		_ = conn.SetWriteDeadline(time.Now().Add(oobTimeout))
		_, _ = conn.Write(r.hello)
		conn.Close()
	}
}

// answer echoes every ping to its sender until ctx ends.
func (r *pingResponder) answer(ctx context.Context) error {
	var wc [16]vrdma.WorkCompletion
	for {
		n, err := r.u.cq.PollWait(ctx, wc[:], 0)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		for i := range n {
			if err := r.handle(&wc[i]); err != nil {
				return err
			}
		}
	}
}

func (r *pingResponder) handle(wc *vrdma.WorkCompletion) error {
	u := r.u
	if wc.ID >= pingRecvs { // a reply went
		u.inflight--
		if err := wc.Err(); err != nil {
			return fmt.Errorf("a reply failed, the QP is in error: %w", err)
		}
		return nil
	}
	if wc.Status == ibv.WCWRFlushErr {
		return fmt.Errorf("the QP went to the error state: %w", wc.Err())
	}
	if wc.Status == ibv.WCSuccess {
		data, sgid := u.datagram(wc)
		if kind, seq, ts, ok := parsePing(data); ok && kind == pingRequest {
			r.reply(wc.SrcQP, sgid, seq, ts)
		}
	}
	return u.repost(wc.ID)
}

// reply echoes a ping to QP qpn at gid; a reply that cannot go is dropped,
// as a lost datagram would be, and said on stderr.
func (r *pingResponder) reply(qpn uint32, gid vrdma.GID, seq, ts uint64) {
	ah, err := r.u.ah(gid)
	if err == nil {
		var b [pingLen]byte
		putPing(b[:], pingReply, seq, ts)
		err = r.u.sendTo(ah, qpn, r.u.qkey, b[:])
	}
	if err != nil {
		fmt.Fprintf(r.stderr, "vrdma ping: no reply to QPN 0x%06x at %s: %v\n", qpn, gidText(gid), err)
	}
}

// pingStats are the summary's figures, ibping's.
type pingStats struct {
	sent, received int
	min, max, sum  time.Duration
}

func (st *pingStats) add(rtt time.Duration) {
	if st.received == 0 || rtt < st.min {
		st.min = rtt
	}
	st.max = max(st.max, rtt)
	st.sum += rtt
	st.received++
}

// msText formats d as ibping does: milliseconds with three decimals.
func msText(d time.Duration) string {
	us := d.Microseconds()
	return fmt.Sprintf("%d.%03d", us/1000, us%1000)
}

// pingClient learns where the responder is, then pings it.
func pingClient(ctx context.Context, cfg *pingConfig, stdout io.Writer) error {
	addr := net.JoinHostPort(cfg.host, strconv.Itoa(cfg.port))
	d := net.Dialer{Timeout: oobTimeout}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("cannot reach a vrdma ping responder at %s: %w: start one there with `vrdma ping -S` (or give its port with -p)", addr, err)
	}
	peer, err := readPingHello(conn)
	conn.Close()
	if err != nil {
		return fmt.Errorf("%s: %w: is a responder (`vrdma ping -S`) listening there, on the right -p?", addr, err)
	}
	u, err := openUD(cfg, peer.QKey)
	if err != nil {
		return err
	}
	defer u.close()
	ah, err := u.ah(peer.GID)
	if err != nil {
		return err
	}
	label := fmt.Sprintf("GID %s QPN 0x%06x", gidText(peer.GID), peer.QPN)
	var st pingStats
	epoch := time.Now()
	for seq := uint64(1); cfg.count == 0 || seq <= uint64(cfg.count); seq++ {
		if seq > 1 && !cfg.flood {
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
		if ctx.Err() != nil {
			break
		}
		st.sent++
		rtt, ok, err := u.ping(ctx, ah, peer, seq, epoch, cfg.timeout)
		if err != nil {
			return err
		}
		if ok {
			st.add(rtt)
			fmt.Fprintf(stdout, "Pong from %s (%s): time %s ms\n", peer.Host, label, msText(rtt))
		}
	}
	var avg time.Duration
	if st.received > 0 {
		avg = st.sum / time.Duration(st.received)
	}
	fmt.Fprintf(stdout, "\n--- %s (%s) vrdma ping statistics ---\n", peer.Host, label)
	fmt.Fprintf(stdout, "%d packets transmitted, %d received, %d%% packet loss, time %d ms\n",
		st.sent, st.received, (st.sent-st.received)*100/max(st.sent, 1), time.Since(epoch).Milliseconds())
	fmt.Fprintf(stdout, "rtt min/avg/max = %s/%s/%s ms\n", msText(st.min), msText(avg), msText(st.max))
	if st.sent > 0 && st.received == 0 {
		return fmt.Errorf("no reply from %s (%s): the responder's UD QP is not reachable from this adapter; check -d and -g on both sides", cfg.host, label)
	}
	return nil
}

// ping sends ping seq and waits up to timeout for its reply; ok is false
// when it did not come (or ctx ended first).
func (u *udEnd) ping(ctx context.Context, ah *vrdma.AH, peer pingPeer, seq uint64, epoch time.Time, timeout time.Duration) (rtt time.Duration, ok bool, err error) {
	var b [pingLen]byte
	putPing(b[:], pingRequest, seq, uint64(time.Since(epoch)))
	deadline := time.Now().Add(timeout)
	wctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	for u.inflight == pingSends { // every send buffer still busy: reap first
		if _, _, err := u.reap(wctx, seq); err != nil || time.Now().After(deadline) || ctx.Err() != nil {
			return 0, false, err
		}
	}
	if err := u.sendTo(ah, peer.QPN, peer.QKey, b[:]); err != nil {
		return 0, false, err
	}
	for {
		ts, got, err := u.reap(wctx, seq)
		if err != nil || got {
			return time.Since(epoch) - time.Duration(ts), got, err
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return 0, false, nil
		}
	}
}

// reap handles the completions waiting (or the next to come before ctx
// ends): sends free their buffer, receives are read and reposted. got says
// whether the reply to seq came, with the timestamp it echoes.
func (u *udEnd) reap(ctx context.Context, seq uint64) (ts uint64, got bool, err error) {
	var wc [8]vrdma.WorkCompletion
	n, err := u.cq.PollWait(ctx, wc[:], 100)
	if err != nil {
		// The CQ may see the deadline pass a moment before ctx does.
		if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) {
			return 0, false, nil
		}
		return 0, false, err
	}
	for i := range n {
		w := &wc[i]
		if w.ID >= pingRecvs {
			u.inflight--
			if err := w.Err(); err != nil {
				return 0, false, fmt.Errorf("a ping failed: %w", err)
			}
			continue
		}
		if w.Status == ibv.WCWRFlushErr {
			return 0, false, fmt.Errorf("the QP went to the error state: %w", w.Err())
		}
		if w.Status == ibv.WCSuccess { // else a datagram too big for the buffer: not a reply
			data, _ := u.datagram(w)
			if kind, s, t, ok := parsePing(data); ok && kind == pingReply && s == seq {
				ts, got = t, true
			}
		}
		if err := u.repost(w.ID); err != nil {
			return 0, false, err
		}
	}
	return ts, got, nil
}
