package main

import (
	"fmt"
	"io"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/switchview"
)

const (
	portGroupAddUsage = "portgroup add NAME [--vlan N] [--pcp N] [--dscp N] [--mtu 256|512|1024|2048|4096] [--pkey 0xNNNN]"
	portGroupUsage    = portGroupAddUsage + " | portgroup show [NAME] [--json] | portgroup delete NAME"
)

// runPortGroup adds, shows and deletes the switch's port groups;
// `vrdma portgroup` alone shows them.
func runPortGroup(args []string, stdout, stderr io.Writer) error {
	sub, args := subcommand(args, "show")
	switch sub {
	case "add", "create":
		return portGroupAdd(args, stdout)
	case "show", "list":
		return portGroupShow(args, stdout)
	case "delete", "del":
		return portGroupDelete(args)
	case "help":
		subcommandHelp(stderr, portGroupUsage)
		return nil
	}
	return usagef("unknown portgroup command %q: %s", sub, portGroupUsage)
}

func portGroupAdd(args []string, stdout io.Writer) error {
	fs, socket := newFlagSet("portgroup add", portGroupAddUsage)
	vlan := &rangeFlag{what: "VLAN", max: 4094, fix: "give a VLAN ID from 0 (untagged) to 4094"}
	pcp := &rangeFlag{what: "PCP", max: 7, fix: "give an 802.1p priority from 0 to 7"}
	dscp := &rangeFlag{what: "DSCP", max: 63, fix: "give a DSCP from 0 to 63 (26 is common for RoCE)"}
	var mtu mtuFlag
	var pkey pkeyFlag
	fs.Var(vlan, "vlan", "VLAN ID `N`, 0 (untagged) to 4094")
	fs.Var(pcp, "pcp", "802.1p priority `N`, 0 to 7")
	fs.Var(dscp, "dscp", "DSCP `N` of the RoCEv2 packets, 0 to 63")
	fs.Var(&mtu, "mtu", "path `MTU`: 256, 512, 1024, 2048 or 4096 (default 1024)")
	fs.Var(&pkey, "pkey", "partition key `0xNNNN`, hex (0x8001) or decimal (default 0xffff)")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("%s: name one port group, got %q", portGroupAddUsage, pos)
	}
	spec := switchview.PortGroup{Name: pos[0], VLAN: uint16(vlan.n), PCP: uint8(pcp.n), DSCP: uint8(dscp.n), MTU: int(mtu), PKey: uint16(pkey)}
	if err := withAdmin(*socket, func(adm *vrdma.Admin) error { return adm.AddPortGroup(spec) }); err != nil {
		return err
	}
	// Show it as the switch now has it, defaults filled in.
	return showPortGroups(*socket, spec.Name, false, stdout)
}

func portGroupShow(args []string, stdout io.Writer) error {
	fs, socket := newFlagSet("portgroup show", "portgroup show [NAME] [--json]")
	asJSON := fs.Bool("json", false, "print the daemon's reply as JSON")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 1 {
		return usagef("portgroup show [NAME]: one name at most, got %q", pos)
	}
	name := ""
	if len(pos) == 1 {
		name = pos[0]
	}
	return showPortGroups(*socket, name, *asJSON, stdout)
}

func portGroupDelete(args []string) error {
	fs, socket := newFlagSet("portgroup delete", "portgroup delete NAME")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("portgroup delete NAME: name one port group to delete (`vrdma portgroup show` lists them), got %q", pos)
	}
	return withAdmin(*socket, func(adm *vrdma.Admin) error { return adm.DeletePortGroup(pos[0]) })
}

// showPortGroups prints the port groups, or only the one named.
func showPortGroups(socket, name string, asJSON bool, w io.Writer) error {
	var resp switchview.PortGroupList
	if err := withAdmin(socket, func(adm *vrdma.Admin) (err error) { resp.PortGroups, err = adm.PortGroups(); return err }); err != nil {
		return err
	}
	if name != "" {
		var one []switchview.PortGroup
		for _, p := range resp.PortGroups {
			if p.Name == name {
				one = append(one, p)
			}
		}
		if len(one) == 0 {
			return fmt.Errorf("no port group %q on the switch: `vrdma portgroup show` lists them, `vrdma portgroup add %s` creates it", name, name)
		}
		resp.PortGroups = one
	}
	if asJSON {
		return printJSON(w, resp)
	}
	t := newTable(w)
	fmt.Fprintf(t, "NAME\tVLAN\tPCP\tDSCP\tMTU\tPKEY\tADAPTERS\n")
	for _, p := range resp.PortGroups {
		fmt.Fprintf(t, "%s\t%d\t%d\t%d\t%d\t0x%04x\t%d\n", p.Name, p.VLAN, p.PCP, p.DSCP, p.MTU, p.PKey, p.Adapters)
	}
	return t.Flush()
}
