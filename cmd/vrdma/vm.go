package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/internal/daemon"
)

const (
	vmCreateUsage = "vm create NAME [--adapters N] [--portgroup PG] [--async] [--native-endpoints] [--pin] [--lid-routing] [--trust-group G] [--uplink LINK] [--owner USER[:GROUP]] [--file VMX]"
	vmUsage       = vmCreateUsage + " | vm show [NAME] [--all] | vm delete NAME"
)

// runVM creates, shows and deletes the host's instances; `vrdma vm` alone
// shows them.
func runVM(args []string, stdout, stderr io.Writer) error {
	sub, args := subcommand(args, "show")
	switch sub {
	case "create", "add":
		return vmCreate(args, stdout)
	case "show", "list":
		return vmShow(args, stdout)
	case "delete", "del":
		return vmDelete(args)
	case "help":
		subcommandHelp(stderr, vmUsage)
		return nil
	}
	return usagef("unknown vm command %q: %s", sub, vmUsage)
}

func vmCreate(args []string, stdout io.Writer) error {
	fs, socket := newFlagSet("vm create", vmCreateUsage)
	n := fs.Int("adapters", 1, fmt.Sprintf("`N` adapters of the instance, 1 to %d (vrdma0...)", daemon.MaxAdapters))
	pg := fs.String("portgroup", "", "the switch's port group `PG` the adapters attach to (default "+daemon.DefaultPortGroup+"; vrdma portgroup show lists them)")
	async := fs.Bool("async", false, "async mode: the daemon polls the adapters' queues on dedicated threads")
	native := fs.Bool("native-endpoints", false, "native endpoints: the adapters' QPs are reachable by any RoCEv2 peer (without it, on a switch with certificates, only by the switch's hosts)")
	lidRouting := fs.Bool("lid-routing", false, "configure the adapters' ports for LID routing: an address vector may name its destination by LID alone, without a GRH, as qperf's do (without it a GRH is required, as on rdma_rxe)")
	pin := fs.Bool("pin", false, "the instance's registered memory must be lockable (the daemon needs root or an unlimited RLIMIT_MEMLOCK)")
	uplink := fs.String("uplink", "", "bind the adapters to verbs link `LINK` (`vrdma link add LINK type verbs dev IBDEV`): their RC QPs and memory regions are the device's, which moves the bytes")
	trust := fs.String("trust-group", "", "trust group `G`: instances of one trust group trust each other: one-sided operations between them bypass the daemon (a group holds the instances of one owner)")
	owner := fs.String("owner", "", "the tenant the instance belongs to, `USER[:GROUP]` by name or number (default: you; another owner needs root or the daemon's admin group); NAME is then the owner's, which root sees as u<uid>.NAME")
	file := fs.String("file", "", "read the options from `VMX`, a .vmx file (displayName, vrdmaN.present, vrdmaN.portGroup, vrdmaN.nativeEndpointSupport, vrdma.asyncMode, sched.mem.pin); flags override it")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 1 {
		return usagef("%s: one instance name, got %q", vmCreateUsage, pos)
	}
	spec := vrdma.InstanceSpec{Adapters: 1}
	if *file != "" {
		o, err := readVMX(*file)
		if err != nil {
			return err
		}
		spec.Name, spec.PortGroup, spec.Async, spec.NativeEndpoints, spec.Pin = o.Name, o.PortGroup, o.Async, o.Native, o.Pin
		if o.Adapters > 0 {
			spec.Adapters = o.Adapters
		}
	}
	// The flags given override the file.
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "adapters":
			spec.Adapters = *n
		case "portgroup":
			spec.PortGroup = *pg
		case "async":
			spec.Async = *async
		case "native-endpoints":
			spec.NativeEndpoints = *native
		case "pin":
			spec.Pin = *pin
		case "lid-routing":
			spec.LIDRouting = *lidRouting
		case "trust-group":
			spec.TrustGroup = *trust
		case "uplink":
			spec.Uplink = *uplink
		}
	})
	if len(pos) == 1 {
		spec.Name = pos[0]
	}
	if spec.Name == "" {
		return usagef("%s: name the instance (or give --file a .vmx with a displayName)", vmCreateUsage)
	}
	if *owner != "" {
		o, err := parseOwner(*owner, systemAccounts)
		if err != nil {
			return usagef("--owner %v", err)
		}
		spec.Owner = &o
	}
	return withAdmin(*socket, func(adm *vrdma.Admin) error {
		info, err := adm.CreateInstance(spec)
		if err == nil {
			fmt.Fprintln(stdout, instanceSummary(info))
		}
		return err
	})
}

// instanceSummary says what vm create made, in one line.
func instanceSummary(i vrdma.InstanceInfo) string {
	var names []string
	for _, a := range i.Adapters {
		names = append(names, a.Name)
	}
	plural := "s"
	if len(names) == 1 {
		plural = ""
	}
	s := fmt.Sprintf("instance %s on host %s, owner %s: %d adapter%s (%s), port group %s", i.Name, orDash(i.Host), ownerName(i.Owner, systemAccounts),
		len(names), plural, strings.Join(names, ", "), portGroupOf(i))
	for _, opt := range []struct {
		on   bool
		text string
	}{{instanceAsync(i), "async"}, {i.Native, "native endpoints"}, {i.Pin, "pinned memory"}, {i.TrustGroup != "", "trust group " + i.TrustGroup},
		{i.Temporary, "temporary"}} {
		if opt.on {
			s += ", " + opt.text
		}
	}
	return s
}

func vmShow(args []string, stdout io.Writer) error {
	fs, socket := newFlagSet("vm show", "vm show [NAME] [--all]")
	all := fs.Bool("all", false, "every host's instances on the switch, not only this host's")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 1 {
		return usagef("vm show [NAME]: one name at most, got %q", pos)
	}
	var insts []vrdma.InstanceInfo
	err = withAdmin(*socket, func(adm *vrdma.Admin) (err error) {
		if *all {
			insts, err = adm.SwitchInstances()
		} else {
			insts, err = adm.Instances()
		}
		return err
	})
	if err != nil {
		return err
	}
	t := newTable(stdout)
	fmt.Fprintf(t, "INSTANCE\tHOST\tOWNER\tADAPTERS\tASYNC\tNATIVE\tPIN\tPORTGROUP\tPROCESSES\tTRUST-GROUP\tDEVICES\n")
	found := false
	for _, i := range insts {
		if len(pos) == 1 && i.Name != pos[0] {
			continue
		}
		found = true
		var names []string
		for _, a := range i.Adapters {
			names = append(names, a.Name)
		}
		procs := fmt.Sprint(i.Sessions)
		if i.Remote {
			procs = "-" // another host's: its daemon knows
		}
		fmt.Fprintf(t, "%s\t%s\t%s\t%d\t%v\t%v\t%v\t%s\t%s\t%s\t%s\n", i.Name, orDash(i.Host), ownerName(i.Owner, systemAccounts), len(i.Adapters), instanceAsync(i), i.Native, i.Pin,
			portGroupOf(i), procs, orDash(i.TrustGroup), orDash(strings.Join(names, ",")))
	}
	if len(pos) == 1 && !found {
		return fmt.Errorf("no instance %q here: `vrdma vm show --all` lists the switch's", pos[0])
	}
	return t.Flush()
}

func vmDelete(args []string) error {
	fs, socket := newFlagSet("vm delete", "vm delete NAME")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("vm delete NAME: name one instance to delete (`vrdma vm show` lists them), got %q", pos)
	}
	return withAdmin(*socket, func(adm *vrdma.Admin) error { return adm.DeleteInstance(pos[0]) })
}

// instanceAsync: the instance is in async mode (daemons before the switch
// said so only on the adapters).
func instanceAsync(i vrdma.InstanceInfo) bool {
	for _, a := range i.Adapters {
		if a.Async {
			return true
		}
	}
	return i.Async
}

// portGroupOf names the instance's port group; none means the default one.
func portGroupOf(i vrdma.InstanceInfo) string {
	if i.PortGroup == "" {
		return daemon.DefaultPortGroup
	}
	return i.PortGroup
}
