package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/switchview"
)

const hostUsage = "host show [NAME] [--json] | " + hostCertUsage

// runHost shows the switch's live hosts; `vrdma host` alone shows them.
func runHost(args []string, stdout, stderr io.Writer) error {
	sub, args := subcommand(args, "show")
	switch sub {
	case "cert":
		return runHostCert(args, stdout)
	case "help":
		subcommandHelp(stderr, hostUsage)
		return nil
	}
	if sub != "show" && sub != "list" {
		return usagef("unknown host command %q: %s", sub, hostUsage)
	}
	fs, socket := newFlagSet("host show", "host show [NAME] [--json]")
	asJSON := fs.Bool("json", false, "print the daemon's reply as JSON")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 1 {
		return usagef("host show [NAME]: one name at most, got %q", pos)
	}
	var resp switchview.HostList
	if err := withAdmin(*socket, func(adm *vrdma.Admin) (err error) { resp.Hosts, err = adm.Hosts(); return err }); err != nil {
		return err
	}
	if len(pos) == 1 {
		var one []switchview.Host
		for _, h := range resp.Hosts {
			if h.Name == pos[0] {
				one = append(one, h)
			}
		}
		if len(one) == 0 {
			return fmt.Errorf("no host %q on the switch: `vrdma host show` lists the live ones (a host whose daemon stopped leaves when its lease ends)", pos[0])
		}
		resp.Hosts = one
	}
	if *asJSON {
		return printJSON(stdout, resp)
	}
	sm := false
	for _, h := range resp.Hosts {
		printHost(stdout, h)
		sm = sm || h.SM
	}
	if sm {
		fmt.Fprintln(stdout, "* holds the subnet manager")
	}
	return nil
}

// printHost prints one host as a block, in `vrdma link show`'s keyword
// style: the name (* when it holds the subnet manager), then indented its
// record and the path this host's adapters take to it.
func printHost(w io.Writer, h switchview.Host) {
	head := "host " + h.Name
	if h.SM {
		head += " *"
	}
	if h.Self {
		head += " (this host)"
	}
	fmt.Fprintln(w, head)
	fmt.Fprintf(w, "    identity %s\n", orDash(h.Identity))
	fmt.Fprintf(w, "    addresses %s\n", orDash(strings.Join(h.Addrs, " ")))
	fmt.Fprintf(w, "    tcp %s\n", orDash(h.TCPEndpoint))
	for _, u := range h.Uplinks {
		fmt.Fprintf(w, "    uplink %s kind %s state %s", u.Name, u.Kind, orDash(u.State))
		if u.MTU > 0 {
			fmt.Fprintf(w, " mtu %d", u.MTU)
		}
		if u.Device != "" {
			fmt.Fprintf(w, " dev %s link_layer %s", u.Device, orDash(u.LinkLayer))
		}
		fmt.Fprintln(w)
		if u.Kind == "verbs" {
			printVerbsUplink(w, u)
		}
		for i, g := range u.GIDs {
			if i < len(u.GIDTypes) {
				fmt.Fprintf(w, "        gid %d %s %s\n", i, g, u.GIDTypes[i])
				continue
			}
			fmt.Fprintf(w, "        gid %d %s\n", i, g)
		}
	}
	fmt.Fprintf(w, "    path %s\n", orDash(h.Path))
	for _, b := range h.Bound {
		fmt.Fprintf(w, "    bound to %s: to bound instances %s\n", b.Uplink, b.ToBound)
		fmt.Fprintf(w, "    bound to %s: to unbound instances %s\n", b.Uplink, b.ToUnbound)
	}
}

// printVerbsUplink prints what path selection reads of a verbs uplink:
// its transport, InfiniBand LIDs and subnet, IP subnets, the device's
// limits, and whether the daemon carries QPs on it.
func printVerbsUplink(w io.Writer, u switchview.Uplink) {
	fmt.Fprintf(w, "        transport %s", orDash(u.Transport))
	if u.LinkLayer == "InfiniBand" {
		fmt.Fprintf(w, " lid %d sm_lid %d subnet_prefix %s", u.LID, u.SMLID, orDash(u.SubnetPrefix))
	}
	if len(u.Subnets) > 0 {
		fmt.Fprintf(w, " subnets %s", strings.Join(u.Subnets, ","))
	}
	fmt.Fprintln(w)
	if c := u.Caps; c != nil {
		inline := "unknown"
		if c.MaxInline > 0 {
			inline = fmt.Sprint(c.MaxInline)
		}
		fmt.Fprintf(w, "        atomic %s max_sge %d max_qp_wr %d max_inline %s\n", c.Atomic, c.MaxSGE, c.MaxQPWR, inline)
	}
	qps := "no (its daemon cannot carry QPs on a device yet: paths to the host take software RoCEv2 or the TCP channel)"
	if u.CarriesQPs {
		qps = "yes, for instances bound to it"
		if len(u.Carries) > 0 {
			qps += ": " + strings.Join(u.Carries, ", ")
		}
	}
	fmt.Fprintf(w, "        carries_qps %s\n", qps)
}
