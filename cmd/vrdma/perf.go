package main

// vrdma perf: qperf's tests over vrdma adapters. As qperf: without a test
// it is the server, with HOST and tests the client; --loopback runs both
// ends of each test in this process.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/internal/daemon"
	"github.com/vrdma/vrdma/internal/perf"
)

const perfUsage = `usage:
  server:   vrdma perf [-lp PORT] [-d DEV] [-g IDX] [--max-clients N] [-v]
  client:   vrdma perf HOST [-lp PORT] [-d DEV] [-g IDX] [--json] [-m SIZE] [-t SECS] [-v] TEST...
  loopback: vrdma perf --loopback [--async] [--trusted] [--threads N] [--random] [--json] [-m SIZE] [-t SECS] [-v] TEST...
tests: %s
`

// perfFlags are vrdma perf's options; which apply depends on the mode.
type perfFlags struct {
	vopts    *vrdma.Options
	loopback bool
	async    bool
	trusted  bool
	asJSON   bool
	size     string
	secs     float64
	verbose  bool
	threads  int
	random   bool
	port     int
	dev      string
	gid      int
	clients  int             // a server's --max-clients
	set      map[string]bool // the flags given
}

// Flags that only some modes take.
var (
	loopbackOnly = []string{"async", "trusted", "threads", "random"}
	clientOnly   = []string{"json", "m", "t"}
	splitOnly    = []string{"listen-port", "lp", "listen_port", "d", "g"}
	serverOnly   = []string{"max-clients"}
)

func runPerf(args []string, stdout, stderr io.Writer) error {
	// The first SIGINT or SIGTERM ends the run cleanly (a loopback run
	// deletes its instances, a client closes its connection, a server its
	// clients'); a second one kills as usual.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	context.AfterFunc(ctx, stop)
	return perfMain(ctx, args, stdout, stderr, nil)
}

// perfMain is runPerf under ctx; a server ends when ctx does. listening,
// if not nil, is told the server's address once it listens.
func perfMain(ctx context.Context, args []string, stdout, stderr io.Writer, listening func(net.Addr)) error {
	f, names, err := parsePerfArgs(args)
	if err != nil {
		return err
	}
	switch {
	case f.loopback:
		return perfLoopback(ctx, f, names, stdout, stderr)
	case len(names) == 0:
		return perfServer(ctx, f, stdout, stderr, listening)
	}
	return perfClient(ctx, f, names[0], names[1:], stdout)
}

// parsePerfArgs reads the options, which may come before, between or
// after the operands, as qperf allows.
func parsePerfArgs(args []string) (*perfFlags, []string, error) {
	fs := flag.NewFlagSet("perf", flag.ContinueOnError)
	f := &perfFlags{vopts: clientFlags(fs)}
	fs.BoolVar(&f.loopback, "loopback", false, "run both ends on this host, in this process, on two fresh instances")
	fs.BoolVar(&f.async, "async", false, "loopback: use async-mode adapters (the daemon polls their queues)")
	fs.BoolVar(&f.trusted, "trusted", false, "loopback: put the two instances in one trust group: one-sided operations bypass the daemon")
	fs.BoolVar(&f.asJSON, "json", false, "print one JSON object per test")
	fs.StringVar(&f.size, "m", "", "message size (64, 4K, 1M; default 64K for bandwidth tests, 1 byte for latency)")
	fs.Float64Var(&f.secs, "t", 2, "seconds per test")
	fs.BoolVar(&f.verbose, "v", false, "verbose: more figures per test; a server prints a line per test served")
	fs.IntVar(&f.threads, "threads", 0, "loopback ping-pong tests: 1 = one thread plays both ends, 2 = each end on its own pinned CPU (default: 2 for rc_rdma_write_lat with --trusted, else 1)")
	fs.BoolVar(&f.random, "random", false, "loopback: fill the regions with pseudo-random bytes, as perftest does, not zeros (copying zeros can be faster)")
	fs.IntVar(&f.port, "listen-port", perf.DefaultPort, "the TCP port the server listens on and the client connects to")
	fs.IntVar(&f.port, "lp", perf.DefaultPort, "short for --listen-port")
	fs.IntVar(&f.port, "listen_port", perf.DefaultPort, "qperf's spelling of --listen-port")
	fs.StringVar(&f.dev, "d", "", "this end's adapter (default: the instance's first)")
	fs.IntVar(&f.gid, "g", perf.AutoGID, "this end's GID index (default: the GID of the control connection's address family, IPv4-mapped for IPv4, else 0)")
	fs.IntVar(&f.clients, "max-clients", 0, "server: clients served at once, each running its tests (default 4); others are told to come back")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), perfUsage, strings.Join(perf.TestNames(), " "))
		fs.PrintDefaults()
	}
	var names []string
	for {
		if err := parse(fs, args); err != nil {
			return nil, nil, err
		}
		if fs.NArg() == 0 {
			break
		}
		names = append(names, fs.Arg(0))
		args = fs.Args()[1:]
	}
	f.set = map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { f.set[fl.Name] = true })
	return f, names, nil
}

// reject is a usage error naming the first of flags that was given.
func (f *perfFlags) reject(flags []string, why string) error {
	var given []string
	for _, n := range flags {
		if f.set[n] {
			given = append(given, "-"+n)
		}
	}
	if len(given) == 0 {
		return nil
	}
	sort.Strings(given)
	return usagef("%s: %s", strings.Join(given, ", "), why)
}

// config checks the options of a run with tests and makes its Config.
func (f *perfFlags) config(names []string) (perf.Config, error) {
	cfg := perf.Config{Tests: names, Duration: time.Duration(f.secs * float64(time.Second)), Async: f.async, Trusted: f.trusted, Threads: f.threads, Random: f.random}
	if len(names) == 0 {
		return cfg, usagef("name at least one test: %s", strings.Join(perf.TestNames(), " "))
	}
	if f.size != "" {
		n, err := perf.ParseSize(f.size)
		if err != nil {
			return cfg, usagef("%v", err)
		}
		cfg.MsgSize = n
	}
	if err := cfg.Validate(); err != nil {
		return cfg, usagef("%v", err)
	}
	if f.threads < 0 || f.threads > 2 {
		return cfg, usagef("--threads %d: 1 or 2", f.threads)
	}
	if f.secs <= 0 || f.secs > 3600 {
		return cfg, usagef("-t %g: give 0 < seconds ≤ 3600", f.secs)
	}
	return cfg, nil
}

// emit prints one result as the options ask.
func (f *perfFlags) emit(w io.Writer) func(perf.Result) error {
	return func(r perf.Result) error {
		if f.asJSON {
			return r.WriteJSON(w)
		}
		r.WriteText(w, f.verbose)
		return nil
	}
}

func perfLoopback(ctx context.Context, f *perfFlags, names []string, stdout, stderr io.Writer) error {
	if err := f.reject(append(splitOnly, serverOnly...), "a server's and a client's options: --loopback makes its own two instances with one adapter each"); err != nil {
		return err
	}
	cfg, err := f.config(names)
	if err != nil {
		return err
	}
	opts, cleanup, err := loopbackInstances(*f.vopts, f.async, f.trusted, stderr, f.verbose)
	if err != nil {
		return err
	}
	defer cleanup()
	cfg.A, cfg.B = opts[0], opts[1]
	for _, n := range names {
		if n == "conf" && !f.asJSON {
			perf.WriteConf(stdout, perf.LocalConf(), daemonPID(cfg.A), nil)
		}
	}
	return perf.Run(ctx, cfg, f.emit(stdout))
}

// daemonPID returns the pid of the daemon serving o's instance, or 0.
func daemonPID(o vrdma.Options) int {
	devs, err := vrdma.Devices(o)
	if err != nil || len(devs) == 0 {
		return 0
	}
	d, err := vrdma.Open(devs[0].Name, o)
	if err != nil {
		return 0
	}
	defer d.Close()
	return d.DaemonPID()
}

func perfServer(ctx context.Context, f *perfFlags, stdout, stderr io.Writer, listening func(net.Addr)) error {
	if err := f.reject(append(loopbackOnly, clientOnly...), "a client's options: a server (vrdma perf without a test) takes -lp, -d, -g and -v, and runs each test as its client asks"); err != nil {
		return err
	}
	if f.port < 0 || f.port > 65535 {
		return usagef("--listen-port %d: give a TCP port, 1 to 65535", f.port)
	}
	cfg, err := f.serverConfig(stdout, stderr)
	if err != nil {
		return err
	}
	ln, err := listenTCP(f.port, "--listen-port (-lp)")
	if err != nil {
		return err
	}
	if listening != nil {
		listening(ln.Addr())
	}
	return perf.Serve(ctx, ln, cfg)
}

// serverConfig checks a server's options and makes its ServerConfig.
func (f *perfFlags) serverConfig(stdout, stderr io.Writer) (perf.ServerConfig, error) {
	cfg := perf.ServerConfig{Local: *f.vopts, Device: f.dev, GIDIndex: f.gid, MaxClients: f.clients, ErrLog: stderr}
	cfg.Local.Client = "vrdma perf"
	if f.verbose {
		cfg.Log = stdout
	}
	if f.set["max-clients"] && (f.clients < 1 || f.clients > 1024) {
		return cfg, usagef("--max-clients %d: give 1 to 1024 clients at once", f.clients)
	}
	return cfg, nil
}

func perfClient(ctx context.Context, f *perfFlags, host string, names []string, stdout io.Writer) error {
	if slices.Contains(perf.TestNames(), host) {
		return usagef("%q is a test, not a host: name the server first (vrdma perf HOST TEST...), or run both ends here with --loopback", host)
	}
	if err := f.reject(loopbackOnly, "only with --loopback: a client and its server are one end each"); err != nil {
		return err
	}
	if err := f.reject(serverOnly, "a server's option: give it to `vrdma perf` without a test"); err != nil {
		return err
	}
	cfg, err := f.config(names)
	if err != nil {
		return err
	}
	if f.port < 1 || f.port > 65535 {
		return usagef("--listen-port %d: give the server's TCP port, 1 to 65535", f.port)
	}
	local := *f.vopts
	local.Client = "vrdma perf"
	c, err := perf.Dial(ctx, perf.ClientConfig{Server: net.JoinHostPort(strings.Trim(host, "[]"), strconv.Itoa(f.port)),
		Local: local, Device: f.dev, GIDIndex: f.gid, MsgSize: cfg.MsgSize, Duration: cfg.Duration})
	if err != nil {
		return err
	}
	defer c.Close()
	emit := f.emit(stdout)
	for _, n := range names {
		if n == "conf" {
			if !f.asJSON {
				rem := c.Remote()
				perf.WriteConf(stdout, perf.LocalConf(), daemonPID(local), &rem)
			}
			continue
		}
		r, err := c.Run(ctx, n)
		if err != nil {
			return err
		}
		if err := emit(r); err != nil {
			return err
		}
	}
	return nil
}

// loopbackInstances creates two one-adapter instances for the two ends of a
// loopback run, on the daemon at o.Socket or, when none answers there, on
// one embedded in this process. cleanup deletes them again.
func loopbackInstances(o vrdma.Options, async, trusted bool, stderr io.Writer, verbose bool) ([2]vrdma.Options, func(), error) {
	var out [2]vrdma.Options
	stop := func() {}
	adm, err := vrdma.DialAdmin(o)
	if errors.Is(err, vrdma.ErrNoDaemon) {
		dir, derr := os.MkdirTemp("", "vrdma-perf-")
		if derr != nil {
			return out, nil, derr
		}
		d, derr := daemon.New(daemon.Config{SocketPath: filepath.Join(dir, "vrdma.sock")})
		if derr != nil {
			os.RemoveAll(dir)
			return out, nil, derr
		}
		go d.Serve()
		if verbose {
			fmt.Fprintf(stderr, "no daemon answered; running an embedded one at %s\n", d.SocketPath())
		}
		o.Socket = d.SocketPath()
		stop = func() { d.Close(); os.RemoveAll(dir) }
		adm, err = vrdma.DialAdmin(o)
	}
	if err != nil {
		stop()
		return out, nil, err
	}
	names := [2]string{fmt.Sprintf("perf-a-%d", os.Getpid()), fmt.Sprintf("perf-b-%d", os.Getpid())}
	group := ""
	if trusted {
		group = fmt.Sprintf("perf-%d", os.Getpid())
	}
	for i, n := range names {
		// Temporary: should this process die without cleaning up (SIGKILL),
		// the daemon deletes the instances once its connections are gone.
		if _, err := adm.CreateInstance(vrdma.InstanceSpec{Name: n, Adapters: 1, Async: async, TrustGroup: group, Temporary: true}); err != nil {
			for _, m := range names[:i] {
				adm.DeleteInstance(m)
			}
			adm.Close()
			stop()
			return out, nil, err
		}
		out[i] = vrdma.Options{Socket: o.Socket, Instance: n, Client: "vrdma perf"}
	}
	return out, func() {
		for _, n := range names {
			adm.DeleteInstance(n)
		}
		adm.Close()
		stop()
	}, nil
}
