package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/internal/daemon"
	"github.com/vrdma/vrdma/internal/perf"
)

func runPerf(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("perf", flag.ContinueOnError)
	o := clientFlags(fs)
	loopback := fs.Bool("loopback", false, "run both ends on this host, in this process, on two fresh instances")
	async := fs.Bool("async", false, "use async-mode adapters (the daemon polls their queues)")
	trusted := fs.Bool("trusted", false, "put the two loopback instances in one trust group: one-sided operations bypass the daemon")
	asJSON := fs.Bool("json", false, "print one JSON object per test")
	size := fs.String("m", "", "message size (64, 4K, 1M; default 64K for bandwidth tests, 1 byte for latency)")
	secs := fs.Float64("t", 2, "seconds per test")
	verbose := fs.Bool("v", false, "verbose: more figures per test")
	threads := fs.Int("threads", 0, "ping-pong tests: 1 = one thread plays both ends, 2 = each end on its own pinned CPU (default: 2 for rc_rdma_write_lat with --trusted, else 1)")
	fs.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: vrdma perf --loopback [--async] [--trusted] [--json] [-m SIZE] [-t SECS] [-v] TEST...\ntests: %s\n", strings.Join(perf.TestNames(), " "))
		fs.SetOutput(os.Stderr)
		fs.PrintDefaults()
	}
	// Options may come before, between or after the test names, as qperf allows.
	var names []string
	for {
		if err := parse(fs, args); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		names = append(names, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if !*loopback {
		return usagef("two-host runs (`vrdma perf` as server, `vrdma perf HOST TEST...` as client) come with the RoCEv2 uplink; on one host use --loopback")
	}
	if len(names) == 0 {
		return usagef("name at least one test: %s", strings.Join(perf.TestNames(), " "))
	}
	cfg := perf.Config{Tests: names, Duration: time.Duration(*secs * float64(time.Second)), Async: *async, Trusted: *trusted, Threads: *threads}
	if *size != "" {
		n, err := perf.ParseSize(*size)
		if err != nil {
			return usagef("%v", err)
		}
		cfg.MsgSize = n
	}
	if err := cfg.Validate(); err != nil {
		return usagef("%v", err)
	}
	if *threads < 0 || *threads > 2 {
		return usagef("--threads %d: 1 or 2", *threads)
	}
	if *secs <= 0 || *secs > 3600 {
		return usagef("-t %g: give 0 < seconds ≤ 3600", *secs)
	}
	opts, cleanup, err := loopbackInstances(*o, *async, *trusted, stderr, *verbose)
	if err != nil {
		return err
	}
	defer cleanup()
	cfg.A, cfg.B = opts[0], opts[1]
	for _, n := range names {
		if n == "conf" && !*asJSON {
			pid := 0
			if d, err := vrdma.Open("vrdma0", cfg.A); err == nil {
				pid = d.DaemonPID()
				d.Close()
			}
			perf.WriteConf(stdout, pid)
		}
	}
	return perf.Run(context.Background(), cfg, func(r perf.Result) error {
		if *asJSON {
			return r.WriteJSON(stdout)
		}
		r.WriteText(stdout, *verbose)
		return nil
	})
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
		if _, err := adm.CreateInstance(vrdma.InstanceSpec{Name: n, Adapters: 1, Async: async, TrustGroup: group}); err != nil {
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
