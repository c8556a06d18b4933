package main

import (
	"fmt"
	"io"
	"net/netip"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/switchview"
)

const mcastUsage = "mcast show [GROUP] [--json]"

// runMcast shows the switch's multicast groups: per group, the tenants and
// hosts whose QPs are attached (what saquery -g lists of an InfiniBand
// subnet's multicast members, and ip maddr of a host's IP groups); an
// administrator sees every tenant's, anyone else the own tenant's.
func runMcast(args []string, stdout, stderr io.Writer) error {
	sub, args := subcommand(args, "show")
	switch sub {
	case "help":
		subcommandHelp(stderr, mcastUsage)
		return nil
	case "show", "list":
	default:
		return usagef("unknown mcast command %q: %s", sub, mcastUsage)
	}
	fs, socket := newFlagSet("mcast show", "mcast show [GROUP] [--json]")
	asJSON := fs.Bool("json", false, "print the daemon's reply as JSON")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 1 {
		return usagef("mcast show [GROUP]: one group at most, got %q", pos)
	}
	var want netip.Addr
	if len(pos) == 1 {
		if want, err = netip.ParseAddr(pos[0]); err != nil || !want.IsMulticast() {
			return usagef("mcast show %q: not a multicast address; give one like 239.1.2.3 or ff0e::1", pos[0])
		}
	}
	var resp switchview.McastList
	if err := withAdmin(*socket, func(adm *vrdma.Admin) (err error) { resp.Groups, err = adm.McastGroups(); return err }); err != nil {
		return err
	}
	if want.IsValid() {
		var one []switchview.McastGroup
		for _, g := range resp.Groups {
			if a, err := netip.ParseAddr(g.Group); err == nil && a == want.Unmap() {
				one = append(one, g)
			}
		}
		resp.Groups = one
	}
	if resp.Groups == nil {
		resp.Groups = []switchview.McastGroup{}
	}
	if *asJSON {
		return printJSON(stdout, resp)
	}
	if len(resp.Groups) == 0 {
		fmt.Fprintln(stdout, "no multicast groups")
		return nil
	}
	tw := newTable(stdout)
	fmt.Fprintln(tw, "GROUP\tTENANT\tHOST\tQPS")
	for _, g := range resp.Groups {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\n", g.Group, g.Tenant, g.Host, g.QPs)
	}
	return tw.Flush()
}
