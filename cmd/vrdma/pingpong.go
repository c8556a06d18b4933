package main

// vrdma pingpong: rdma-core's ibv_rc_pingpong over vrdma adapters, with its
// options, its TCP exchange, its QP attributes, its SEND/RECV loop and its
// output, so that either end can be the other tool.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/ibv"
)

// The work request IDs of ibv_rc_pingpong; pending is a set of them.
const (
	ppRecvWRID = 1
	ppSendWRID = 2
)

// ppConfig is a pingpong's command line.
type ppConfig struct {
	vopts   vrdma.Options
	host    string // the server to connect to; "" runs the server
	port    int
	dev     string // "" = the first device
	ibPort  int
	size    int
	mtu     ibv.MTU
	rxDepth int
	iters   int
	sl      int
	events  bool // sleep on CQ events instead of polling
	gidIdx  int  // < 0: no GID
	check   bool // -c: validate the received buffer
}

// ppOption is one entry of ibv_rc_pingpong's getopt_long table.
type ppOption struct {
	short byte // 0: long only
	long  string
	arg   bool
}

var ppOptions = []ppOption{
	{'p', "port", true}, {'d', "ib-dev", true}, {'i', "ib-port", true}, {'s', "size", true},
	{'m', "mtu", true}, {'r', "rx-depth", true}, {'n', "iters", true}, {'l', "sl", true},
	{'e', "events", false}, {'g', "gid-idx", true}, {'o', "odp", false}, {'O', "iodp", false},
	{'P', "prefetch", false}, {'t', "ts", false}, {'c', "chk", false}, {'j', "dm", false},
	{'N', "new_send", false}, {'h', "help", false}, {0, "socket", true}, {0, "instance", true},
}

const ppUsage = `usage:
  vrdma pingpong [OPTIONS]        start a server and wait for connection
  vrdma pingpong [OPTIONS] HOST   connect to server at HOST

options (those of ibv_rc_pingpong):
  -p, --port=<port>      listen on/connect to port <port> (default 18515)
  -d, --ib-dev=<dev>     use IB device <dev> (default first device found)
  -i, --ib-port=<port>   use port <port> of IB device (default 1)
  -s, --size=<size>      size of message to exchange (default 4096)
  -m, --mtu=<size>       path MTU (default 1024)
  -r, --rx-depth=<dep>   number of receives to post at a time (default 500)
  -n, --iters=<iters>    number of exchanges (default 1000)
  -l, --sl=<sl>          service level value
  -e, --events           sleep on CQ events (default poll)
  -g, --gid-idx=<gid index> local port gid index (vrdma ports are RoCE: give one, e.g. -g 0)
  -c, --chk              validate received buffer
  -N, --new_send         use new post send WR API (vrdma has one post API: same as without)
  -o, -O, -P, -t, -j     on-demand paging, prefetch, timestamps, device memory: not supported
      --socket=<path>    the vrdma daemon's socket (default $VRDMA_SOCKET or /run/vrdma/vrdma.sock)
      --instance=<name>  the instance to attach to (default $VRDMA_INSTANCE or "default")
`

// errPPHelp asks for the usage text.
var errPPHelp = errors.New("help")

func runPingpong(args []string, stdout, stderr io.Writer) error {
	cfg, err := parsePingpongArgs(args)
	if errors.Is(err, errPPHelp) {
		fmt.Fprint(stdout, ppUsage)
		return flag.ErrHelp
	}
	if err != nil {
		return err
	}
	return pingpong(cfg, stdout, nil)
}

// parsePingpongArgs reads the command line as ibv_rc_pingpong's getopt_long
// loop does, checking each value.
func parsePingpongArgs(args []string) (*ppConfig, error) {
	cfg := &ppConfig{port: 18515, ibPort: 1, size: 4096, mtu: ibv.MTU1024, rxDepth: 500, iters: 1000, gidIdx: -1}
	cfg.vopts.Client = "vrdma pingpong"
	vals, operands, err := getoptLong(args, ppOptions)
	if err != nil {
		return nil, usagef("%v (see vrdma pingpong --help)", err)
	}
	var odp, prefetch, ts, dm bool
	for _, v := range vals {
		var err error
		switch v.opt.long {
		case "port":
			cfg.port, err = v.int(0, 65535)
		case "ib-dev":
			cfg.dev = v.arg
		case "ib-port":
			cfg.ibPort, err = v.int(1, 255)
		case "size":
			cfg.size, err = v.int(1, 1<<31)
		case "mtu":
			cfg.mtu, err = v.mtu()
		case "rx-depth":
			cfg.rxDepth, err = v.int(1, 1<<24)
		case "iters":
			cfg.iters, err = v.int(1, math.MaxInt32)
		case "sl":
			cfg.sl, err = v.int(0, 15)
		case "events":
			cfg.events = true
		case "gid-idx":
			cfg.gidIdx, err = v.int(math.MinInt32, math.MaxInt32)
		case "odp", "iodp":
			odp = true
		case "prefetch":
			prefetch = true
		case "ts":
			ts = true
		case "chk":
			cfg.check = true
		case "dm":
			dm = true
		case "new_send": // the library has one way to post; the wire is the same
		case "help":
			return nil, errPPHelp
		case "socket":
			cfg.vopts.Socket = v.arg
		case "instance":
			cfg.vopts.Instance = v.arg
		}
		if err != nil {
			return nil, err
		}
	}
	if len(operands) > 1 {
		return nil, usagef("one HOST at most, got %q (see vrdma pingpong --help)", operands)
	}
	if len(operands) == 1 {
		cfg.host = operands[0]
	}
	switch {
	case odp:
		return nil, errors.New("on-demand paging (-o/--odp, -O/--iodp) is not supported: vrdma registers and pins every region when it is allocated; run without it")
	case prefetch:
		return nil, errors.New("prefetch (-P/--prefetch) is valid only with an on-demand memory region, which vrdma does not support; run without it")
	case ts:
		return nil, errors.New("completion timestamps (-t/--ts) are not supported: vrdma completions carry no timestamp; run without -t")
	case dm:
		return nil, errors.New("device memory (-j/--dm) is not supported: vrdma adapters have no memory of their own; run without -j")
	}
	return cfg, nil
}

// optValue is one option as given: which, its argument, its spelling.
type optValue struct {
	opt  *ppOption
	arg  string
	name string // "-s" or "--size", for messages
}

// int parses the argument as strtol(arg, NULL, 0) would (0x hex, 0 octal),
// but whole, and within [lo, hi].
func (v optValue) int(lo, hi int) (int, error) {
	n, err := strconv.ParseInt(v.arg, 0, 64)
	if err != nil || n < int64(lo) || n > int64(hi) {
		return 0, usagef("%s %q: want a number from %d to %d (see vrdma pingpong --help)", v.name, v.arg, lo, hi)
	}
	return int(n), nil
}

// mtu parses a path MTU in bytes, as pp_mtu_to_enum does.
func (v optValue) mtu() (ibv.MTU, error) {
	n, err := strconv.ParseInt(v.arg, 0, 64)
	for m := ibv.MTU256; err == nil && m <= ibv.MTU4096; m++ {
		if int64(m.Bytes()) == n {
			return m, nil
		}
	}
	return 0, usagef("%s %q: the path MTU is 256, 512, 1024, 2048 or 4096 (see vrdma pingpong --help)", v.name, v.arg)
}

// getoptLong splits args as GNU getopt_long does: short options alone
// (-s 64), attached (-s64) or clustered (-ec), long options as --size=64 or
// --size 64 or by an unambiguous prefix (--it 5), operands anywhere, and
// "--" ending the options.
func getoptLong(args []string, table []ppOption) (vals []optValue, operands []string, err error) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return vals, append(operands, args[i+1:]...), nil
		case strings.HasPrefix(a, "--"):
			name, arg, hasArg := strings.Cut(a[2:], "=")
			o, err := lookupLong(table, name)
			if err != nil {
				return nil, nil, err
			}
			switch {
			case !o.arg && hasArg:
				return nil, nil, fmt.Errorf("option '--%s' doesn't allow an argument", o.long)
			case o.arg && !hasArg:
				if i+1 == len(args) {
					return nil, nil, fmt.Errorf("option '--%s' requires an argument", o.long)
				}
				i++
				arg = args[i]
			}
			vals = append(vals, optValue{opt: o, arg: arg, name: "--" + o.long})
		case len(a) > 1 && a[0] == '-':
			for j := 1; j < len(a); j++ {
				o := lookupShort(table, a[j])
				if o == nil {
					return nil, nil, fmt.Errorf("invalid option -- '%s'", a[j:j+1])
				}
				v := optValue{opt: o, name: "-" + a[j:j+1]}
				if o.arg {
					v.arg = a[j+1:]
					if v.arg == "" {
						if i+1 == len(args) {
							return nil, nil, fmt.Errorf("option requires an argument -- '%s'", a[j:j+1])
						}
						i++
						v.arg = args[i]
					}
					j = len(a)
				}
				vals = append(vals, v)
			}
		default:
			operands = append(operands, a)
		}
	}
	return vals, operands, nil
}

func lookupShort(table []ppOption, c byte) *ppOption {
	for i := range table {
		if table[i].short != 0 && table[i].short == c {
			return &table[i]
		}
	}
	return nil
}

func lookupLong(table []ppOption, name string) (*ppOption, error) {
	var found []*ppOption
	for i := range table {
		switch {
		case table[i].long == name:
			return &table[i], nil
		case name != "" && strings.HasPrefix(table[i].long, name):
			found = append(found, &table[i])
		}
	}
	switch len(found) {
	case 0:
		return nil, fmt.Errorf("unrecognized option '--%s'", name)
	case 1:
		return found[0], nil
	}
	names := make([]string, len(found))
	for i, o := range found {
		names[i] = "'--" + o.long + "'"
	}
	return nil, fmt.Errorf("option '--%s' is ambiguous; possibilities: %s", name, strings.Join(names, " "))
}

// openDevice opens the adapter called name, or the instance's first one.
func openDevice(name string, o vrdma.Options) (*vrdma.Device, error) {
	if name == "" {
		devs, err := vrdma.Devices(o)
		if err != nil {
			return nil, err
		}
		if len(devs) == 0 {
			return nil, errors.New("no vrdma devices found: the instance has no adapters (`vrdma vm show` lists them)")
		}
		name = devs[0].Name
	}
	return vrdma.Open(name, o)
}

// ppSide is one end of a pingpong, ibv_rc_pingpong's pingpong_context: one
// buffer both sent from and received into, one CQ, one RC QP.
type ppSide struct {
	cfg   *ppConfig
	dev   *vrdma.Device
	pd    *vrdma.PD
	mr    *vrdma.MR
	cq    *vrdma.CQ
	qp    *vrdma.QP
	buf   []byte
	psn   uint32
	send  []vrdma.SendWR
	recvs []vrdma.RecvWR

	routs, rcnt, scnt, pending int
}

// openPPSide makes the verbs objects pp_init_ctx makes, the QP in INIT.
func openPPSide(cfg *ppConfig) (*ppSide, error) {
	dev, err := openDevice(cfg.dev, cfg.vopts)
	if err != nil {
		return nil, err
	}
	s := &ppSide{cfg: cfg, dev: dev, psn: rand.Uint32() & 0xffffff}
	if err := s.init(); err != nil {
		dev.Close() // the daemon releases what was made
		return nil, err
	}
	return s, nil
}

func (s *ppSide) init() error {
	cfg := s.cfg
	var err error
	if s.pd, err = s.dev.AllocPD(); err != nil {
		return fmt.Errorf("couldn't allocate PD: %w", err)
	}
	if s.mr, err = s.pd.AllocMR(cfg.size, ibv.AccessLocalWrite); err != nil {
		return fmt.Errorf("couldn't register MR: %w", err)
	}
	s.buf = s.mr.Bytes()
	for i := range s.buf {
		s.buf[i] = 0x7b
	}
	if s.cq, err = s.dev.CreateCQ(cfg.rxDepth + 1); err != nil {
		return fmt.Errorf("couldn't create CQ: %w", err)
	}
	// ibv_rc_pingpong asks for one send WR, and never has more than one
	// outstanding; the daemon lays out a one-entry send ring such that the
	// receive ring after it is misaligned, so ask for two.
	s.qp, err = s.pd.CreateQP(vrdma.QPInitAttr{Type: ibv.RC, SendCQ: s.cq, RecvCQ: s.cq,
		Cap: vrdma.QPCap{MaxSendWR: 2, MaxRecvWR: cfg.rxDepth, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		return fmt.Errorf("couldn't create QP: %w", err)
	}
	flags := ibv.SendSignaled
	if c := s.qp.Cap().MaxInlineData; c >= cfg.size && cfg.size <= vrdma.MaxInlineGather {
		flags |= ibv.SendInline
	}
	sge := []ibv.SGE{s.mr.SGE(0, cfg.size)}
	s.send = []vrdma.SendWR{{ID: ppSendWRID, Opcode: ibv.WRSend, Flags: flags, SGL: sge}}
	s.recvs = make([]vrdma.RecvWR, cfg.rxDepth)
	for i := range s.recvs {
		s.recvs[i] = vrdma.RecvWR{ID: ppRecvWRID, SGL: sge}
	}
	init := ibv.QPAttr{State: ibv.QPSInit, PKeyIndex: 0, PortNum: uint8(cfg.ibPort), AccessFlags: 0}
	if err := s.qp.Modify(&init, ibv.AttrState|ibv.AttrPKeyIndex|ibv.AttrPort|ibv.AttrAccessFlags); err != nil {
		return fmt.Errorf("failed to modify QP to INIT: %w", err)
	}
	return nil
}

// close destroys what openPPSide made, in pp_close_ctx's order.
func (s *ppSide) close() error {
	err := errors.Join(s.qp.Destroy(), s.cq.Destroy(), s.mr.Dereg(), s.pd.Dealloc())
	return errors.Join(err, s.dev.Close())
}

// postRecv posts n receives of the whole buffer and returns how many went.
func (s *ppSide) postRecv(n int) int {
	if err := s.qp.PostRecv(s.recvs[:n]); err != nil {
		if pe := (*vrdma.PostError)(nil); errors.As(err, &pe) {
			return pe.Index
		}
		return 0
	}
	return n
}

// connect takes the QP to RTR and RTS with pp_connect_ctx's attributes.
func (s *ppSide) connect(remote vrdma.Endpoint) error {
	cfg := s.cfg
	// ibv_rc_pingpong sets is_global (a GRH to the peer's GID) only when
	// the peer sent a GID, and without one a RoCE port cannot route. vrdma
	// ports are RoCE ports: there is no LID to route by.
	if !globalGID(remote.GID) {
		return fmt.Errorf("failed to modify QP to RTR: the peer sent no GID (GID %s), and vrdma ports, like RoCE ports, route by GID only: run both sides with -g (e.g. -g 0)", gidText(remote.GID))
	}
	if err := rcPeer(remote); err != nil {
		return fmt.Errorf("failed to modify QP to RTR: %w", err)
	}
	if cfg.gidIdx < 0 {
		return errors.New("failed to modify QP to RTR: this side has no source GID: vrdma ports, like RoCE ports, route by GID only: run both sides with -g (e.g. -g 0)")
	}
	rtr := ibv.QPAttr{State: ibv.QPSRTR, PathMTU: cfg.mtu, DestQPN: remote.QPN, RQPSN: remote.PSN,
		MaxDestRdAtomic: 1, MinRNRTimer: 12,
		AV: ibv.AHAttr{DGID: remote.GID, SGIDIndex: uint8(cfg.gidIdx), HopLimit: 1, SL: uint8(cfg.sl), PortNum: uint8(cfg.ibPort)}}
	if err := s.qp.Modify(&rtr, ibv.AttrState|ibv.AttrAV|ibv.AttrPathMTU|ibv.AttrDestQPN|ibv.AttrRQPSN|
		ibv.AttrMaxDestRdAtomic|ibv.AttrMinRNRTimer); err != nil {
		return fmt.Errorf("failed to modify QP to RTR: %w", err)
	}
	rts := ibv.QPAttr{State: ibv.QPSRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, SQPSN: s.psn, MaxRdAtomic: 1}
	if err := s.qp.Modify(&rts, ibv.AttrState|ibv.AttrTimeout|ibv.AttrRetryCnt|ibv.AttrRNRRetry|
		ibv.AttrSQPSN|ibv.AttrMaxQPRdAtomic); err != nil {
		return fmt.Errorf("failed to modify QP to RTS: %w", err)
	}
	return nil
}

// rcPeer checks that remote can be the other end of an RC QP: one QP of
// one port, not a special QP or a multicast group, which a hostile or
// confused peer might send and which no pingpong has.
func rcPeer(remote vrdma.Endpoint) error {
	switch {
	case remote.QPN == 0:
		return errors.New("the peer's QPN 0x000000 is the subnet management QP, which no pingpong has: is the other end a pingpong?")
	case remote.QPN == 1:
		return errors.New("the peer's QPN 0x000001 is the general services QP, which no pingpong has: is the other end a pingpong?")
	case remote.QPN == 0xffffff:
		return errors.New("the peer's QPN 0xffffff is the multicast QPN: an RC QP connects to one QP; is the other end a pingpong?")
	case remote.GID[0] == 0xff:
		return fmt.Errorf("the peer's GID %s is a multicast group: an RC QP connects to one port's unicast GID; is the other end a pingpong?", gidText(remote.GID))
	}
	return nil
}

// pingpong runs one end as ibv_rc_pingpong's main does. A server accepts
// its one client on ln if it is given, else on cfg.port of every address.
func pingpong(cfg *ppConfig, stdout io.Writer, ln net.Listener) (err error) {
	s, err := openPPSide(cfg)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := s.close(); cerr != nil && err == nil {
			err = fmt.Errorf("couldn't release the verbs objects: %w", cerr)
		}
	}()
	if s.routs = s.postRecv(cfg.rxDepth); s.routs < cfg.rxDepth {
		return fmt.Errorf("couldn't post receive (%d of %d)", s.routs, cfg.rxDepth)
	}
	if _, err := s.dev.QueryPort(cfg.ibPort); err != nil {
		return fmt.Errorf("couldn't get port info: %w", err)
	}
	local := vrdma.Endpoint{QPN: s.qp.QPN(), PSN: s.psn} // LID 0: vrdma ports have none, as RoCE ports
	if cfg.gidIdx >= 0 {
		if local.GID, err = s.dev.GID(cfg.gidIdx); err != nil {
			return fmt.Errorf("can't read sgid of index %d: %w (`vrdma devinfo -v` lists the GIDs)", cfg.gidIdx, err)
		}
	}
	fmt.Fprintf(stdout, "  local address:  LID 0x%04x, QPN 0x%06x, PSN 0x%06x, GID %s\n", local.LID, local.QPN, local.PSN, gidText(local.GID))

	var remote vrdma.Endpoint
	if cfg.host != "" {
		remote, err = s.dial(local)
	} else {
		remote, err = s.serve(local, ln)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "  remote address: LID 0x%04x, QPN 0x%06x, PSN 0x%06x, GID %s\n", remote.LID, remote.QPN, remote.PSN, gidText(remote.GID))

	s.pending = ppRecvWRID
	if cfg.host != "" {
		if cfg.check {
			markPages(s.buf)
		}
		if err := s.qp.PostSend(s.send); err != nil {
			return fmt.Errorf("couldn't post send: %w", err)
		}
		s.pending |= ppSendWRID
	}
	start := time.Now()
	if err := s.loop(); err != nil {
		return err
	}
	usec := float32(time.Since(start).Microseconds())
	bytes := int64(cfg.size) * int64(cfg.iters) * 2
	fmt.Fprintf(stdout, "%d bytes in %.2f seconds = %.2f Mbit/sec\n", bytes, float64(usec)/1e6, float64(bytes)*8/float64(usec))
	fmt.Fprintf(stdout, "%d iters in %.2f seconds = %.2f usec/iter\n", cfg.iters, float64(usec)/1e6, float64(usec/float32(cfg.iters)))
	if cfg.host == "" && cfg.check {
		for _, p := range badPages(s.buf) {
			fmt.Fprintf(stdout, "invalid data in page %d\n", p)
		}
	}
	return nil
}

// dial is the client's exchange: connect to the server, trade addresses.
func (s *ppSide) dial(local vrdma.Endpoint) (vrdma.Endpoint, error) {
	addr := net.JoinHostPort(s.cfg.host, strconv.Itoa(s.cfg.port))
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return vrdma.Endpoint{}, fmt.Errorf("couldn't connect to %s: %w: start the server side there first (vrdma pingpong, or ibv_rc_pingpong, without HOST) or check -p", addr, err)
	}
	defer conn.Close()
	return ppClientExchange(conn, local, s.connect)
}

// serve is the server's exchange: accept one client, trade addresses.
func (s *ppSide) serve(local vrdma.Endpoint, ln net.Listener) (vrdma.Endpoint, error) {
	if ln == nil {
		var err error
		if ln, err = listenTCP(s.cfg.port, "-p (--port)"); err != nil {
			return vrdma.Endpoint{}, err
		}
	}
	conn, err := ln.Accept()
	ln.Close()
	if err != nil {
		return vrdma.Endpoint{}, fmt.Errorf("accept() failed: %w", err)
	}
	defer conn.Close()
	return ppServerExchange(conn, local, s.connect)
}

// loop runs the exchanges until iters messages went each way, polling the
// CQ (or sleeping on it with -e) two completions at a time. It gives up
// when no completion comes for ppIdleTimeout: the other end went away, or
// the address it gave leads nowhere.
func (s *ppSide) loop() error {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	go watchFatal(ctx, s.dev, cancel)
	idle := time.AfterFunc(ppIdleTimeout, func() {
		cancel(fmt.Errorf("nothing completed in %v: the other end stopped, or cannot reach this QP or be reached from it (is each end's GID one the other can route to?)", ppIdleTimeout))
	})
	defer idle.Stop()
	var wc [2]vrdma.WorkCompletion
	spins := 0
	for s.rcnt < s.cfg.iters || s.scnt < s.cfg.iters {
		if s.cfg.events {
			if err := s.cq.Wait(ctx); err != nil {
				if ctx.Err() != nil {
					err = context.Cause(ctx)
				}
				return fmt.Errorf("failed to get cq_event: %w", err)
			}
		}
		n, err := s.cq.Poll(wc[:])
		if err != nil {
			return fmt.Errorf("poll CQ failed: %w", err)
		}
		if n == 0 && !s.cfg.events {
			if spins++; spins%1024 == 0 {
				if ctx.Err() != nil {
					return context.Cause(ctx)
				}
				runtime.Gosched()
			}
			continue
		}
		if n > 0 {
			idle.Reset(ppIdleTimeout)
		}
		for i := range n {
			if err := s.complete(&wc[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

// complete handles one completion as parse_single_wc does: count it, keep
// the receive queue above one entry, and send again once both the last send
// and a receive have completed.
func (s *ppSide) complete(wc *vrdma.WorkCompletion) error {
	if wc.Status != ibv.WCSuccess {
		return fmt.Errorf("failed status %v (%d) for wr_id %d: %w", wc.Status, wc.Status, wc.ID, wc.Err())
	}
	switch wc.ID {
	case ppSendWRID:
		s.scnt++
	case ppRecvWRID:
		if s.routs--; s.routs <= 1 {
			s.routs += s.postRecv(s.cfg.rxDepth - s.routs)
			if s.routs < s.cfg.rxDepth {
				return fmt.Errorf("couldn't post receive (%d of %d)", s.routs, s.cfg.rxDepth)
			}
		}
		s.rcnt++
	default:
		return fmt.Errorf("completion for unknown wr_id %d", wc.ID)
	}
	s.pending &^= int(wc.ID)
	if s.scnt < s.cfg.iters && s.pending == 0 {
		if err := s.qp.PostSend(s.send); err != nil {
			return fmt.Errorf("couldn't post send: %w", err)
		}
		s.pending = ppRecvWRID | ppSendWRID
	}
	return nil
}

// watchFatal cancels ctx when the device reports an error that no
// completion will: the daemon gone, the QP or CQ broken.
func watchFatal(ctx context.Context, dev *vrdma.Device, cancel context.CancelCauseFunc) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-dev.Events():
			switch ev.Type {
			case ibv.EventDeviceFatal, ibv.EventQPFatal, ibv.EventQPReqErr, ibv.EventQPAccessErr, ibv.EventCQErr:
				cancel(fmt.Errorf("asynchronous event %v: %s", ev.Type, ev.Reason))
				return
			}
		}
	}
}

// pageSize is the stride of -c's check, the host's page size as in
// ibv_rc_pingpong.
var pageSize = os.Getpagesize()

// markPages writes what ibv_rc_pingpong -c writes before the first send:
// i / page_size % sizeof(char) at the start of every page, which is 0.
func markPages(buf []byte) {
	for i := 0; i < len(buf); i += pageSize {
		buf[i] = 0
	}
}

// badPages returns the pages whose first byte is not what markPages wrote:
// the server's -c check of what it received (its buffer starts as 0x7b).
func badPages(buf []byte) []int {
	var bad []int
	for i := 0; i < len(buf); i += pageSize {
		if buf[i] != 0 {
			bad = append(bad, i/pageSize)
		}
	}
	return bad
}
