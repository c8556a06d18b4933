package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"

	"github.com/vrdma/vrdma/internal/daemon"
	"github.com/vrdma/vrdma/internal/verbs/verbsbuild"
)

func runDaemon(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("daemon", flag.ContinueOnError)
	sock := fs.String("socket", envOr("VRDMA_SOCKET", daemon.DefaultSocket), "unix socket to serve")
	state := fs.String("state-dir", "/var/lib/vrdma", "directory where instances persist ('' = nothing persists)")
	group := fs.String("group", "", "group that may use the devices: the socket is made group-owned by it (like the rdma group)")
	mode := octalFlag(0o660)
	fs.Var(&mode, "mode", "socket permission bits `MODE`, octal")
	verbose := fs.Bool("v", false, "log each session and failure")
	verbsHelper := fs.String("verbs-helper", "", "a prebuilt helper for verbs links (`PATH`), for hosts without a compiler; default $VRDMA_VERBS_HELPER, else built from the embedded sources on first use (docs/design/verbs-uplink.md)")
	linkGSO := fs.Bool("link-gso", os.Getenv("VRDMA_LINK_GSO") != "0", "RoCEv2 links send each run of a message's MTU-sized packets as one UDP GSO buffer (docs/design/bulk-path.md); --link-gso=false or VRDMA_LINK_GSO=0 sends packet by packet")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the daemon to this file until it stops (go tool pprof reads it)")
	adminGroup := fs.String("admin-group", "", "group whose members may administer the switch (links, port groups, instances for other owners) besides root and the daemon's user")
	userLimits := limitsFlag{}
	instLimits := limitsFlag{}
	fs.Var(userLimits, "limit", "per-uid limits, RESOURCE=N,... (session, instance, pd, cq, qp, mr, srq, ah, locked, cmlisten, cmconn, ring, mw; N a count, 16G, or unlimited; locked and ring are bytes, by default a quarter and a sixteenth of the host's memory); repeatable")
	fs.Var(instLimits, "instance-limit", "per-instance limits, RESOURCE=N,... (as --limit, but not instance); repeatable")
	totalLimits := limitsFlag{}
	fs.Var(totalLimits, "total-limit", "limits on all tenants together, RESOURCE=N,... (as --limit; default locked = half the host's memory, ring = an eighth, the rest unlimited); repeatable")
	userDaemon := fs.Bool("user", false, "be your own daemon, for your programs alone: serve a socket in a directory that is yours alone ($XDG_RUNTIME_DIR/vrdma/vrdma.sock, else /run/user/UID/vrdma or $TMPDIR/vrdma-UID), join no switch, persist nothing, give the adapters addresses no other daemon on the host has; needs no root (vrdma run starts one when no daemon answers)")
	idleExit := fs.Duration("idle-exit", 0, "stop once no program has been connected for this long, e.g. 30s (0 = never)")
	lidRouting := fs.Bool("lid-routing", false, "configure every port for LID routing: an address vector may name its destination by LID alone, without a GRH, as qperf's do (without it a GRH is required, as on rdma_rxe; vrdma vm create --lid-routing configures one instance's ports)")
	detach := fs.Bool("detach", false, "run in the background, logging to SOCKET.log, and return once the daemon serves")
	sw := switchFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if *userDaemon {
		if err := userDefaults(fs, sock, state, &mode, sw); err != nil {
			return err
		}
	}
	if *detach {
		return startDetached(args, *sock, stdout)
	}
	swCfg, hostName, err := sw.config()
	if err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected arguments %q", fs.Args())
	}
	if swCfg.Enable {
		if swCfg.Member, err = sw.member(*state, hostName); err != nil {
			return err
		}
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	// Catch the stop signals before the daemon starts, so that one that
	// arrives while it sets up (its etcd, its links) still closes it
	// cleanly once it is up, instead of killing it half made.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	d, err := daemon.New(daemon.Config{SocketPath: *sock, StateDir: *state, Group: *group, SocketMode: os.FileMode(mode), Logger: log, LinkGSO: *linkGSO, VerbsHelper: *verbsHelper, BuildVerbsHelper: verbsbuild.Build,
		HostName: hostName, Switch: swCfg,
		AdminGroup: *adminGroup, UserLimits: daemon.Limits(userLimits), InstanceLimits: daemon.Limits(instLimits),
		TotalLimits: daemon.Limits(totalLimits), DistinctIdentity: *userDaemon, IdleExit: *idleExit, LIDRouting: *lidRouting})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "vrdma daemon serving %s\n", d.SocketPath())
	deviceNode(log)
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			d.Close()
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			d.Close()
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer f.Close()
		defer pprof.StopCPUProfile()
	}
	errc := make(chan error, 1)
	go func() { errc <- d.Serve() }()
	select {
	case s := <-sig:
		log.Info("stopping", "signal", s)
		return d.Close()
	case err := <-errc:
		d.Close()
		return err
	}
}

// limitsFlag gathers --limit (or --instance-limit) flags: each a list of
// RESOURCE=N; a later one overrides an earlier one for the same resource.
type limitsFlag daemon.Limits

func (f limitsFlag) String() string { return daemon.Limits(f).String() }

func (f limitsFlag) Set(s string) error {
	l, err := daemon.ParseLimits(s)
	if err != nil {
		return err
	}
	for r, n := range l {
		f[r] = n
	}
	return nil
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
