package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/switchview"
)

const switchUsage = "switch show [--json] | switch ca init [--dir DIR]"

// runSwitch shows the distributed switch this daemon is on; `vrdma switch`
// alone shows it too.
func runSwitch(args []string, stdout, stderr io.Writer) error {
	sub, args := subcommand(args, "show")
	switch sub {
	case "ca":
		return runSwitchCA(args, stdout)
	case "help":
		subcommandHelp(stderr, switchUsage)
		return nil
	}
	if sub != "show" {
		return usagef("unknown switch command %q: %s", sub, switchUsage)
	}
	fs, socket := newFlagSet("switch show", switchUsage)
	asJSON := fs.Bool("json", false, "print the daemon's reply as JSON")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("switch show takes no arguments, got %q", pos)
	}
	var info switchview.Switch
	if err := withAdmin(*socket, func(adm *vrdma.Admin) (err error) { info, err = adm.Switch(); return err }); err != nil {
		return err
	}
	if *asJSON {
		return printJSON(stdout, info)
	}
	printSwitch(stdout, info)
	return nil
}

func printSwitch(w io.Writer, s switchview.Switch) {
	t := newTable(w)
	etcd := strings.Join(s.Endpoints, ", ")
	if s.Embedded {
		etcd += " (embedded in this daemon)"
	}
	sm := "none elected yet"
	if s.SMHost != "" {
		sm = fmt.Sprintf("%s (priority %d)", s.SMHost, s.SMPriority)
	}
	fmt.Fprintf(t, "switch:\t%s\n", s.Name)
	fmt.Fprintf(t, "etcd:\t%s\n", orDash(etcd))
	fmt.Fprintf(t, "this host:\t%s\n", s.Host)
	fmt.Fprintf(t, "subnet manager:\t%s\n", sm)
	fmt.Fprintf(t, "role:\t%s\n", orDash(s.Role))
	fmt.Fprintf(t, "hosts:\t%d\n", s.Hosts)
	fmt.Fprintf(t, "port groups:\t%d\n", s.PortGroups)
	fmt.Fprintf(t, "instances:\t%d\n", s.Instances)
	fmt.Fprintf(t, "fallbacks:\t%d (connections sent over tcp for want of an RDMA uplink)\n", s.Fallbacks)
	fmt.Fprintf(t, "hosts gone:\t%d\n", s.HostsGone)
	if s.SMReport != "" {
		fmt.Fprintf(t, "sm report:\t%s\n", s.SMReport)
	}
	fmt.Fprintf(t, "security:\t%s\n", orDash(s.Security))
	for _, l := range []struct {
		name string
		st   switchview.ListenerStats
	}{{"tcp channel", s.Channel}} {
		if l.st.Listen == "" {
			fmt.Fprintf(t, "%s:\tnot listening\n", l.name)
			continue
		}
		fmt.Fprintf(t, "%s:\t%s peers %d accepted %d refused %d cut %d unauthorized %d wrong_peer %d dropped %d spoofed %d\n", l.name, l.st.Listen,
			l.st.Peers, l.st.Accepted, l.st.Refused, l.st.Cut, l.st.Unauthorized, l.st.WrongPeer, l.st.Dropped, l.st.Spoofed)
	}
	fmt.Fprintf(t, "outsiders:\t%d CM requests, %d packets dropped (from addresses no member host publishes)\n", s.Outsiders.Requests, s.Outsiders.Packets)
	t.Flush()
}
