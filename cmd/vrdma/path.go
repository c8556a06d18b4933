package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/internal/daemon"
	"github.com/vrdma/vrdma/switchview"
)

const pathUsage = "path ADAPTER_A ADAPTER_B [--ud] [--srq] [--atomics] [--inline BYTES] [--sge N] [--mtu BYTES] [--json]   (adapters as INSTANCE/vrdmaN, or INSTANCE for its vrdma0)"

// runPath prints the path the switch chooses between two adapters and why:
// "memcpy: same host a", "tcp: host c has no RDMA uplink on port group
// default", "verbs: vm1/vrdma0 is bound to verbs uplink hca0 ..." (an
// adapter whose instance is bound to a verbs uplink has its QPs on the
// device). The flags say what the QPs ask of it (UD, atomics, inline
// data, SGEs, path MTU): a verbs uplink whose device lacks one is not
// taken, and the reason says which and the error rdma-core would give.
func runPath(args []string, stdout, stderr io.Writer) error {
	fs, socket := newFlagSet("path", pathUsage)
	asJSON := fs.Bool("json", false, "print the daemon's reply as JSON")
	var req switchview.PathRequest
	fs.BoolVar(&req.UD, "ud", false, "the QPs are UD (iWARP devices have none)")
	fs.BoolVar(&req.SRQ, "srq", false, "the QPs take their receives from an SRQ")
	fs.BoolVar(&req.Atomics, "atomics", false, "the QPs use atomic operations (iWARP devices have none)")
	fs.IntVar(&req.MaxInline, "inline", 0, "`BYTES` of inline data per send WR")
	fs.IntVar(&req.MaxSGE, "sge", 0, "scatter/gather entries per WR (`N`)")
	fs.IntVar(&req.MTU, "mtu", 0, "path MTU in `BYTES` (default: the adapters' port group's)")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	switch {
	case req.MaxInline < 0:
		return usagef("--inline %d: give the bytes of inline data per send WR, 0 or more", req.MaxInline)
	case req.MaxSGE < 0:
		return usagef("--sge %d: give the SGEs per WR, 0 or more", req.MaxSGE)
	case req.MTU != 0 && req.MTU != 256 && req.MTU != 512 && req.MTU != 1024 && req.MTU != 2048 && req.MTU != 4096:
		return usagef("--mtu %d is not an RDMA path MTU: give 256, 512, 1024, 2048 or 4096", req.MTU)
	}
	if len(pos) != 2 {
		return usagef("%s: name two adapters, got %q", pathUsage, pos)
	}
	for _, a := range pos {
		if err := checkAdapterName(a); err != nil {
			return err
		}
	}
	var resp switchview.Path
	if err := withAdmin(*socket, func(adm *vrdma.Admin) (err error) { resp, err = adm.PathFor(pos[0], pos[1], req); return err }); err != nil {
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
