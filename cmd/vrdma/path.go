package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/internal/daemon"
)

const pathUsage = "path ADAPTER_A ADAPTER_B [--json]   (adapters as INSTANCE/vrdmaN, or INSTANCE for its vrdma0)"

// runPath prints the path the switch chooses between two adapters and why:
// "memcpy: same host a", "tcp: host c has no RDMA uplink on port group
// default".
func runPath(args []string, stdout, stderr io.Writer) error {
	fs, socket := newFlagSet("path", pathUsage)
	asJSON := fs.Bool("json", false, "print the daemon's reply as JSON")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usagef("%s: name two adapters, got %q", pathUsage, pos)
	}
	for _, a := range pos {
		if err := checkAdapterName(a); err != nil {
			return err
		}
	}
	var resp vrdma.PathInfo
	if err := withAdmin(*socket, func(adm *vrdma.Admin) (err error) { resp, err = adm.Path(pos[0], pos[1]); return err }); err != nil {
		return err
	}
	if *asJSON {
		return printJSON(stdout, resp)
	}
	fmt.Fprintf(stdout, "%s: %s\n", resp.Kind, resp.Reason)
	return nil
}

// checkAdapterName checks INSTANCE/vrdmaN (or INSTANCE) as the daemon
// parses it, so a typo is a usage error before any call.
func checkAdapterName(s string) error {
	fix := fmt.Sprintf("name it INSTANCE/vrdmaN with N in 0..%d, or INSTANCE for its vrdma0, e.g. vm1/vrdma0", daemon.MaxAdapters-1)
	inst, dev, hasDev := strings.Cut(s, "/")
	if inst == "" {
		return usagef("adapter %q has no instance: %s", s, fix)
	}
	if !hasDev {
		return nil
	}
	digits, ok := strings.CutPrefix(dev, "vrdma")
	n, err := strconv.Atoi(digits)
	if !ok || err != nil || digits != strconv.Itoa(n) || n < 0 || n >= daemon.MaxAdapters {
		return usagef("adapter %q: %s", s, fix)
	}
	return nil
}
