package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/internal/guest"
)

const runUsage = "run [--instance NAME] [--socket PATH] [--print-env] [--] COMMAND [ARGS...]"

const runHelp = `Runs COMMAND, an unmodified verbs or rdma_cm program (ibv_devinfo,
ibv_rc_pingpong, perftest's ib_write_bw, qperf, rping, ...), on vrdma
adapters. It builds the guest library, a drop-in libibverbs.so.1 and
librdmacm.so.1, on first use (and again when vrdma's sources change) into
$VRDMA_GUEST_CACHE or ~/.cache/vrdma (refused if anyone but you and root
can write it or a directory above it), then runs COMMAND with LD_LIBRARY_PATH
naming it: the program loads vrdma's libibverbs and librdmacm instead of
rdma-core's, and its devices are the instance's adapters, vrdma0..vrdma9.
COMMAND replaces vrdma: the exit status and signals are COMMAND's own.
When no daemon answers at the default socket (and neither --socket nor
VRDMA_SOCKET names one), vrdma runs COMMAND on a daemon of its own, embedded
in vrdma for as long as COMMAND runs, and says so on stderr: everything
works on a fresh machine, but only that COMMAND and its children see those
adapters. Start "vrdma daemon" to share adapters between programs.

The build needs a C compiler and rdma-core's headers:
apt-get install gcc libibverbs-dev librdmacm-dev.

Programs that ignore LD_LIBRARY_PATH do not see vrdma: setuid and setgid
binaries (the dynamic loader drops the variable for them), statically linked
programs and those that load libibverbs by its full path. To install the
library for a whole system or a container image: vrdma guest build --out DIR
(docs/guest-library.md).

  vrdma run ibv_devinfo -v
  vrdma run --instance vm1 -- ib_write_bw -d vrdma0
  eval "$(vrdma run --print-env --instance vm1)"   # for this shell

`

// buildGuest returns the directory of the guest library, building it on
// first use. Tests replace it.
var buildGuest = func() (string, error) {
	cache, err := guest.DefaultCacheDir()
	if err != nil {
		return "", err
	}
	return guest.Build(cache)
}

// runRun runs a program on vrdma adapters through the guest library, or
// prints the environment that does (--print-env).
func runRun(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	o := clientFlags(fs)
	printEnv := fs.Bool("print-env", false, "print the environment as export lines for sh instead of running a command")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: vrdma %s\n\n%s", runUsage, runHelp)
		fs.PrintDefaults()
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	argv := fs.Args()
	switch {
	case *printEnv && len(argv) > 0:
		return usagef("--print-env prints the environment instead of running %q: give one or the other", argv[0])
	case !*printEnv && len(argv) == 0:
		return usagef("name the command to run: vrdma %s (e.g. vrdma run -- ibv_devinfo)", runUsage)
	}
	libDir, err := buildGuest()
	if err != nil {
		return err
	}
	vars, err := guestVars(libDir, os.Getenv("LD_LIBRARY_PATH"), *o)
	if err != nil {
		return err
	}
	if *printEnv {
		for _, v := range vars {
			fmt.Fprintf(stdout, "export %s=%s\n", v.name, shellQuote(v.value))
		}
		return nil
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return fmt.Errorf("%v%s", err, packageHint(argv[0]))
	}
	if o.Socket == "" && os.Getenv("VRDMA_SOCKET") == "" && !daemonAnswers(defaultSocket) {
		return runOnEmbeddedDaemon(path, argv, libDir, *o, stderr)
	}
	if err := syscall.Exec(path, argv, withVars(os.Environ(), vars)); err != nil {
		return fmt.Errorf("cannot run %s: %w", path, err)
	}
	return nil // not reached: Exec returns only on failure
}

// envVar is one variable vrdma run sets.
type envVar struct{ name, value string }

// guestVars returns the variables that put a program on vrdma adapters:
// LD_LIBRARY_PATH with libDir first (before oldPath, without repeating
// libDir), and VRDMA_SOCKET and VRDMA_INSTANCE when o names them.
func guestVars(libDir, oldPath string, o vrdma.Options) ([]envVar, error) {
	if strings.ContainsAny(libDir, ":;") {
		return nil, fmt.Errorf("the guest library's directory %q has a ':' or ';', which LD_LIBRARY_PATH cannot hold: set %s to another directory", libDir, guest.CacheEnv)
	}
	path := libDir
	for _, p := range strings.Split(oldPath, ":") {
		if p != "" && p != libDir {
			path += ":" + p
		}
	}
	vars := []envVar{{"LD_LIBRARY_PATH", path}}
	if o.Socket != "" {
		// Absolute, so that a program that changes directory still finds it.
		sock, err := filepath.Abs(o.Socket)
		if err != nil {
			return nil, err
		}
		vars = append(vars, envVar{"VRDMA_SOCKET", sock})
	}
	if o.Instance != "" {
		vars = append(vars, envVar{"VRDMA_INSTANCE", o.Instance})
	}
	return vars, nil
}

// withVars returns environ with vars set, replacing earlier values.
func withVars(environ []string, vars []envVar) []string {
	env := make([]string, 0, len(environ)+len(vars))
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		set := false
		for _, v := range vars {
			set = set || v.name == name
		}
		if !set {
			env = append(env, kv)
		}
	}
	for _, v := range vars {
		env = append(env, v.name+"="+v.value)
	}
	return env
}

// shellSafe matches words sh reads as themselves.
var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_@%+=:,./-]+$`)

// shellQuote quotes s for sh.
func shellQuote(s string) string {
	if shellSafe.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// packageHint names the Debian package of a well-known verbs program that
// is not installed.
func packageHint(name string) string {
	base := filepath.Base(name)
	switch {
	case strings.HasPrefix(base, "ibv_"):
		return " (ibv_devices, ibv_devinfo and the ibv_*_pingpong tools: apt-get install ibverbs-utils)"
	case strings.HasPrefix(base, "ib_"):
		return " (perftest's ib_write_bw, ib_send_lat, ...: apt-get install perftest)"
	case base == "qperf":
		return " (apt-get install qperf)"
	}
	return ""
}
