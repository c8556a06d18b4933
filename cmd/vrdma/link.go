package main

import (
	"flag"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"

	"github.com/vrdma/vrdma"
)

const linkUsage = "link add NAME type rxe netdev IFACE [dscp N] | link add NAME type verbs dev IBDEV [port N] | link show [NAME] | link delete NAME"

// runLink manages the daemon's links (RoCEv2 on host interfaces, or ports
// of the host's own RDMA devices) in
// rdma-core's `rdma link` syntax; `vrdma link` alone shows them.
func runLink(args []string, stdout, stderr io.Writer) error {
	pos, flags := splitLinkFlags(args)
	fs := flag.NewFlagSet("link", flag.ContinueOnError)
	socket := fs.String("socket", "", "daemon socket `PATH` (default $VRDMA_SOCKET or "+vrdma.DefaultSocket+")")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: vrdma %s\n\n", linkUsage)
		fs.PrintDefaults()
	}
	if err := parse(fs, flags); err != nil {
		return err
	}
	sub := "show"
	if len(pos) > 0 {
		sub, pos = pos[0], pos[1:]
	}
	switch sub {
	case "add":
		spec, err := parseLinkAdd(pos)
		if err != nil {
			return err
		}
		return withAdmin(*socket, func(adm *vrdma.Admin) error {
			info, err := adm.AddLink(spec)
			if err == nil {
				printLink(stdout, info)
			}
			return err
		})
	case "show", "list":
		if len(pos) > 1 {
			return usagef("link show [NAME]: one name at most, got %q", pos)
		}
		name := ""
		if len(pos) == 1 {
			name = strings.TrimSuffix(pos[0], "/1") // rdma's NAME/PORT
		}
		return withAdmin(*socket, func(adm *vrdma.Admin) error {
			links, err := adm.Links(name)
			for _, l := range links {
				printLink(stdout, l)
			}
			return err
		})
	case "delete", "del":
		if len(pos) != 1 {
			return usagef("link delete NAME: name the link to delete (`vrdma link show` lists them)")
		}
		return withAdmin(*socket, func(adm *vrdma.Admin) error { return adm.DeleteLink(strings.TrimSuffix(pos[0], "/1")) })
	case "help":
		fs.SetOutput(stderr)
		fs.Usage()
	default:
		return usagef("unknown link command %q: %s", sub, linkUsage)
	}
	return nil
}

// splitLinkFlags separates the flags, wherever they are, from rdma's
// keyword arguments, which the flag package would stop at.
func splitLinkFlags(args []string) (pos, flags []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if len(a) < 2 || a[0] != '-' {
			pos = append(pos, a)
			continue
		}
		flags = append(flags, a)
		if strings.TrimLeft(a, "-") == "socket" && i+1 < len(args) {
			i++
			flags = append(flags, args[i])
		}
	}
	return pos, flags
}

// parseLinkAdd reads `NAME type rxe netdev IFACE [dscp N]` or `NAME type
// verbs dev IBDEV [port N]`.
func parseLinkAdd(args []string) (vrdma.LinkSpec, error) {
	const use = "link add NAME type rxe netdev IFACE [dscp N] | link add NAME type verbs dev IBDEV [port N]"
	var spec vrdma.LinkSpec
	if len(args) == 0 || isLinkKeyword(args[0]) {
		return spec, usagef("%s: the link needs a name (rxe0, say)", use)
	}
	spec.Name, args = args[0], args[1:]
	seen := map[string]bool{}
	for len(args) > 0 {
		key := args[0]
		if !isLinkKeyword(key) {
			return spec, usagef("%s: unknown argument %q", use, key)
		}
		if len(args) < 2 {
			return spec, usagef("%s: %s needs a value", use, key)
		}
		if seen[key] {
			return spec, usagef("%s: %s given twice", use, key)
		}
		seen[key] = true
		val := args[1]
		args = args[2:]
		switch key {
		case "type":
			if val != "rxe" && val != "verbs" {
				return spec, usagef("link type %q: the types are rxe (RoCEv2 over UDP, like the kernel's Soft-RoCE) and verbs (a device of the host's rdma-core: mlx5_0, rxe0)", val)
			}
			spec.Type = val
		case "dev":
			spec.Dev = val
		case "port":
			n, err := strconv.ParseUint(val, 10, 8)
			if err != nil || n == 0 {
				return spec, usagef("port %q: give the device's port number, 1 to 255 (`ibv_devinfo` lists them)", val)
			}
			spec.DevPort = uint8(n)
		case "netdev":
			spec.Netdev = val
		case "dscp":
			n, err := strconv.ParseUint(val, 10, 8)
			if err != nil || n > 63 {
				return spec, usagef("dscp %q: give a number from 0 to 63 (46 is EF, 26 AF31)", val)
			}
			spec.DSCP = uint8(n)
		}
	}
	switch {
	case spec.Type == "":
		return spec, usagef("%s: type is missing: add `type rxe` or `type verbs`", use)
	case spec.Type == "verbs" && (spec.Netdev != "" || seen["dscp"]):
		return spec, usagef("%s: netdev and dscp are for rxe links; a verbs link takes dev and port", use)
	case spec.Type == "verbs" && spec.Dev == "":
		return spec, usagef("%s: dev is missing: add `dev IBDEV` (`ibv_devices` lists them)", use)
	case spec.Type == "verbs":
		return spec, nil
	case spec.Dev != "" || spec.DevPort != 0:
		return spec, usagef("%s: dev and port are for verbs links; an rxe link takes netdev", use)
	case spec.Netdev == "":
		return spec, usagef("%s: netdev is missing: add `netdev IFACE` (`ip link` lists the interfaces)", use)
	}
	return spec, nil
}

func isLinkKeyword(s string) bool {
	return s == "type" || s == "netdev" || s == "dscp" || s == "dev" || s == "port"
}

// printLink prints a link as `rdma link show` does, then, indented, what
// vrdma adds: the GID table, MTU, DSCP, counters and any problem.
func printLink(w io.Writer, l vrdma.LinkInfo) {
	if l.Type == "verbs" {
		printVerbsLink(w, l)
		return
	}
	fmt.Fprintf(w, "link %s/1 state %s physical_state %s netdev %s\n", l.Name, l.State, l.PhysState, l.Netdev)
	for i, g := range l.GIDs {
		fmt.Fprintf(w, "    gid %d %s RoCE v2\n", i, netip.AddrFrom16(g))
	}
	mtu := "-"
	if m := l.ActiveMTU; m.Bytes() > 0 {
		mtu = strconv.Itoa(m.Bytes())
	}
	fmt.Fprintf(w, "    type %s active_mtu %s dscp %d port %d\n", l.Type, mtu, l.DSCP, l.Port)
	c := l.Counters
	fmt.Fprintf(w, "    rx_packets %d rx_bytes %d tx_packets %d tx_bytes %d rx_dropped %d rx_not_ours %d rx_errors %d tx_errors %d\n",
		c.RxPackets, c.RxBytes, c.TxPackets, c.TxBytes, c.RxDropped, c.RxNotOurs, c.RxErrors, c.TxErrors)
	fmt.Fprintf(w, "    rx_malformed %d rx_icrc_errors %d rx_unknown_qp %d rx_bad_pkey %d\n", c.RxMalformed, c.RxICRC, c.RxUnknownQP, c.RxBadPKey)
	if c.TxGSO != 0 || c.RxGSO != 0 {
		fmt.Fprintf(w, "    tx_gso %d rx_gso %d\n", c.TxGSO, c.RxGSO)
	}
	if l.Problem != "" {
		fmt.Fprintf(w, "    problem: %s\n", l.Problem)
	}
}

// printVerbsLink prints a verbs link: its device and port as `rdma link
// show` names them, then what rdma-core reports (as `ibv_devinfo -v`
// words it): transport, link layer, port state, MTU, LID and the GID table
// with each GID's type.
func printVerbsLink(w io.Writer, l vrdma.LinkInfo) {
	port := l.DevPort
	if port == 0 {
		port = 1
	}
	fmt.Fprintf(w, "link %s/1 state %s physical_state %s dev %s port %d\n", l.Name, l.State, l.PhysState, l.Dev, port)
	if v := l.Verbs; v != nil {
		mtu := "-"
		if m := l.ActiveMTU; m.Bytes() > 0 {
			mtu = strconv.Itoa(m.Bytes())
		}
		fmt.Fprintf(w, "    type verbs transport %s link_layer %s port_state %s active_mtu %s lid %d fw_ver %s\n",
			v.Transport, v.LinkLayer, v.PortState, mtu, v.LID, v.FWVer)
		for _, g := range v.GIDs {
			nd := ""
			if g.Netdev != "" {
				nd = ", " + g.Netdev
			}
			fmt.Fprintf(w, "    gid %d %s %s%s\n", g.Index, netip.AddrFrom16(g.GID), g.Type, nd)
		}
	} else {
		fmt.Fprintf(w, "    type verbs\n")
	}
	if l.Problem != "" {
		fmt.Fprintf(w, "    problem: %s\n", l.Problem)
	}
}
