// Command vrdma is vrdma's one binary: the host daemon, rdma-core's tools
// (devices, devinfo, stat) and qperf's (perf) over vrdma adapters, the
// instance administration (vm), the host's RoCEv2 links (link), the
// distributed switch (switch, portgroup, host, path), unmodified verbs
// programs on vrdma adapters (run, guest) and a demonstration (demo).
//
//	vrdma demo                       # everything on an embedded daemon
//	vrdma daemon [--socket PATH]     # the host daemon
//	vrdma devices | devinfo [-d DEV] [-v] | stat [DEV]
//	vrdma perf [-lp PORT] | perf HOST [--json] [-m SIZE] [-t SECS] TEST... | perf --loopback [--async] TEST...
//	vrdma pingpong [-g GIDIDX] [-s SIZE] [-n ITERS] [HOST] # ibv_rc_pingpong's options
//	vrdma ping -S | ping [-c COUNT] [-f] [-w SECS] HOST
//	vrdma run [--instance NAME] [--socket PATH] [--print-env] -- COMMAND ARGS...  # e.g. ibv_devinfo, ib_write_bw, qperf
//	vrdma guest build [--out DIR] | guest path   # the drop-in libibverbs.so.1 that run uses
//	vrdma daemon [--admin-group G] [--limit RES=N,...] [--instance-limit RES=N,...]  # who administers, tenants' quotas
//	vrdma vm create NAME [--adapters N] [--portgroup PG] [--async] [--native-endpoints] [--pin] [--lid-routing] [--trust-group G] [--uplink LINK] [--owner USER[:GROUP]] [--file VMX] | vm show [NAME] [--all] | vm delete NAME
//	vrdma link add NAME type rxe netdev IFACE [dscp N] | link show [NAME] | link delete NAME
//	vrdma switch show [--json]       # the switch, its etcd, the subnet manager
//	vrdma portgroup add NAME [--vlan N] [--pcp N] [--dscp N] [--mtu N] [--pkey 0xNNNN] | portgroup show [NAME] | portgroup delete NAME
//	vrdma host show [NAME]           # the switch's live hosts, their uplinks and the path to each
//	vrdma path INSTANCE[/vrdmaN] INSTANCE[/vrdmaN] [--json]   # memcpy, verbs, rdma or tcp, and why
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/internal/guest"
)

type command struct {
	name    string
	summary string
	run     func(args []string, stdout, stderr io.Writer) error
}

var commands []command

func init() {
	commands = []command{
		{"demo", "run every verb between two instances on an embedded daemon, then a short benchmark", runDemo},
		{"daemon", "run the host daemon (--user: your own, no root)", runDaemon},
		{"devices", "list the adapters (like ibv_devices)", runDevices},
		{"devinfo", "show adapter attributes (like ibv_devinfo)", runDevinfo},
		{"stat", "show adapter state and port counters (like ibstat)", runStat},
		{"perf", "measure bandwidth and latency with qperf's tests", runPerf},
		{"pingpong", "RC SEND ping-pong with a peer (like ibv_rc_pingpong, and with it)", runPingpong},
		{"ping", "ping a responder over UD and print round trips (like ibping)", runPing},
		{"run", "run an unmodified verbs program (ibv_devinfo, perftest, qperf) on vrdma adapters", runRun},
		{"guest", "build the drop-in libibverbs.so.1 that run uses, or install it (--out DIR)", runGuest},
		{"vm", "create, show and delete instances (options also from a .vmx)", runVM},
		{"link", "add, show and delete links: RoCEv2 on host interfaces (like rdma link)", runLink},
		{"switch", "show the distributed switch: its etcd, subnet manager and counts", runSwitch},
		{"portgroup", "add, show and delete the switch's port groups (VLAN, priority, MTU, P_Key)", runPortGroup},
		{"host", "show the switch's live hosts, their uplinks and the path to each", runHost},
		{"mcast", "show the switch's multicast groups: per group, the tenants and hosts with QPs attached", runMcast},
		{"path", "show the path between two adapters (memcpy, verbs, rdma or tcp) and why", runPath},
		{"version", "print the version, the Go release it was built with and the protocol version (also --version)", runVersion},
		{"help", "print a command's help: vrdma help COMMAND [SUBCOMMAND]", runHelpCommand},
	}
}

// errUsage marks an error whose message is usage help; the exit code is 2.
var errUsage = errors.New("usage")

type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }
func (e *usageError) Unwrap() error { return errUsage }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "-help" || len(args) == 1 && args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	if args[0] == "--version" || args[0] == "-version" {
		args[0] = "version"
	}
	for _, c := range commands {
		if c.name == args[0] {
			err := c.run(args[1:], stdout, stderr)
			if err == nil {
				return 0
			}
			if errors.Is(err, flag.ErrHelp) {
				return 0
			}
			fmt.Fprintf(stderr, "vrdma %s: %s\n", c.name, errorText(err))
			if errors.Is(err, errUsage) {
				return 2
			}
			return 1
		}
	}
	fmt.Fprintf(stderr, "vrdma: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

// errorText is what the command line prints of err: the daemon's or the
// library's message without the library's "vrdma: op:" prefix, which the
// command's own prefix replaces.
func errorText(err error) string {
	if e, ok := err.(*vrdma.Error); ok && e.Msg != "" {
		return e.Msg
	}
	return err.Error()
}

func usage(w io.Writer) {
	fmt.Fprintf(w, "usage: vrdma COMMAND [ARGS]\n\ncommands:\n")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "\nvrdma help COMMAND prints a command's options; vrdma --version the version.\n")
	fmt.Fprintf(w, "\nenvironment: VRDMA_SOCKET (daemon socket, default %s), VRDMA_INSTANCE (instance to attach to), %s (where run builds the guest library)\n", vrdma.DefaultSocket, guest.CacheEnv)
}

// clientFlags adds the flags every client command takes.
func clientFlags(fs *flag.FlagSet) *vrdma.Options {
	o := &vrdma.Options{}
	fs.StringVar(&o.Socket, "socket", "", "daemon socket `PATH` (default $VRDMA_SOCKET or "+vrdma.DefaultSocket+")")
	fs.StringVar(&o.Instance, "instance", "", "instance `NAME` to attach to (default $VRDMA_INSTANCE or \"default\")")
	return o
}

func parse(fs *flag.FlagSet, args []string) error {
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(os.Stderr)
			fs.Usage()
			return flag.ErrHelp
		}
		return usagef("%v (see vrdma %s -h)", err, fs.Name())
	}
	return nil
}
