package itest

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/internal/daemon"
	"github.com/vrdma/vrdma/switchview"
	"golang.org/x/sys/unix"
)

// The children of the tenant tests: each checks what it may and may not
// do, prints "ok: ..." or "FAIL: ..." lines, and exits 1 if anything
// failed. VRDMA_SOCKET names the daemon.

const (
	tenantA  = 4001 // owns a-vm (created for it by root) and a-own (its own)
	attacker = 65534
)

// checker collects a child's verdicts.
type checker struct{ failed bool }

func (c *checker) expect(what string, err error, want error) {
	switch {
	case want == nil && err != nil:
		c.failed = true
		fmt.Printf("FAIL: %s: %v\n", what, err)
	case want != nil && !errors.Is(err, want):
		c.failed = true
		fmt.Printf("FAIL: %s: %v, want %v\n", what, err, want)
	default:
		fmt.Printf("ok: %s: %v\n", what, err)
	}
}

func (c *checker) exit() int {
	if c.failed {
		return 1
	}
	return 0
}

// ownerChild runs as tenant A: it attaches to the instance root made for
// it, and creates one of its own in its trust group.
func ownerChild() int {
	var c checker
	dev, err := vrdma.Open("vrdma0", vrdma.Options{Instance: "a-vm"})
	c.expect("tenant A attaches to a-vm, made for it by root", err, nil)
	if dev != nil {
		dev.Close()
	}
	adm, err := vrdma.DialAdmin(vrdma.Options{})
	if err != nil {
		fmt.Println("FAIL: dial:", err)
		return 1
	}
	defer adm.Close()
	info, err := adm.CreateInstance(vrdma.InstanceSpec{Name: "a-own", Adapters: 1, TrustGroup: "ga"})
	c.expect("tenant A creates a-own in its trust group ga", err, nil)
	if err == nil && (info.Owner == nil || *info.Owner != (vrdma.Owner{UID: tenantA, GID: tenantA})) {
		c.failed = true
		fmt.Printf("FAIL: a-own's owner is %+v, want uid and gid %d (SO_PEERCRED)\n", info.Owner, tenantA)
	}
	return c.exit()
}

// attackerChild runs as another tenant (nobody) and tries everything the
// outside review tried, and the switch-wide commands.
func attackerChild() int {
	var c checker
	// A's names are A's: B's a-vm is one B does not have, and A's own
	// (u4001.a-vm, as root sees it) is refused as one that does not exist.
	for _, name := range []string{"a-vm", "u4001.a-vm"} {
		_, err := vrdma.Open("vrdma0", vrdma.Options{Instance: name})
		c.expect("attach to A's instance (VRDMA_INSTANCE="+name+")", err, vrdma.ErrNotFound)
		_, err = vrdma.Devices(vrdma.Options{Instance: name})
		c.expect("list A's instance's devices ("+name+")", err, vrdma.ErrNotFound)
	}
	adm, err := vrdma.DialAdmin(vrdma.Options{})
	if err != nil {
		fmt.Println("FAIL: dial:", err)
		return 1
	}
	defer adm.Close()
	c.expect("delete A's instance", adm.DeleteInstance("a-vm"), vrdma.ErrNotFound)
	c.expect("delete A's instance (u4001.a-vm)", adm.DeleteInstance("u4001.a-vm"), vrdma.ErrNotFound)
	_, err = adm.CreateInstance(vrdma.InstanceSpec{Name: "b-spy", Adapters: 1, TrustGroup: "ga"})
	c.expect("create b-spy in a trust group ga of its own (not A's: the names are each owner's)", err, nil)
	_, err = adm.CreateInstance(vrdma.InstanceSpec{Name: "b-gift", Adapters: 1, Owner: &vrdma.Owner{UID: tenantA, GID: tenantA}})
	c.expect("create an instance for A", err, vrdma.ErrPermission)
	_, err = adm.CreateInstance(vrdma.InstanceSpec{Name: "b-own", Adapters: 1})
	c.expect("create an instance of its own", err, nil)
	insts, err := adm.Instances()
	c.expect("vm show", err, nil)
	var seen []string
	for _, i := range insts {
		seen = append(seen, i.Name)
	}
	if strings.Join(seen, " ") != "b-own b-spy default" {
		c.failed = true
		fmt.Printf("FAIL: vm show lists %v, want only its own and the default\n", seen)
	} else {
		fmt.Printf("ok: vm show lists %v\n", seen)
	}
	_, err = adm.SwitchInstances()
	c.expect("vm show --all (other hosts' records carry no owner)", err, vrdma.ErrPermission)
	_, err = adm.AddLink(vrdma.LinkSpec{Name: "evil0", Type: "rxe", Netdev: "lo"})
	c.expect("link add", err, vrdma.ErrPermission)
	c.expect("link delete", adm.DeleteLink("rxe0"), vrdma.ErrPermission)
	c.expect("portgroup add", adm.AddPortGroup(switchview.PortGroup{Name: "evil", VLAN: 7}), vrdma.ErrPermission)
	c.expect("portgroup delete", adm.DeletePortGroup("default"), vrdma.ErrPermission)
	_, err = adm.Links("")
	c.expect("link show (read-only: open to every user)", err, nil)
	return c.exit()
}

// adminChild runs as a member of the daemon's admin group: it may
// administer (instances for others, deleting them, links, the switch's
// listings) but not attach to a tenant's instance or mix a trust group.
func adminChild() int {
	var c checker
	adm, err := vrdma.DialAdmin(vrdma.Options{})
	if err != nil {
		fmt.Println("FAIL: dial:", err)
		return 1
	}
	defer adm.Close()
	_, err = adm.CreateInstance(vrdma.InstanceSpec{Name: "for-a", Adapters: 1, Owner: &vrdma.Owner{UID: tenantA, GID: tenantA}})
	c.expect("create an instance for A (root's, not the admin group's)", err, vrdma.ErrPermission)
	insts, err := adm.Instances()
	c.expect("vm show", err, nil)
	seen := map[string]bool{}
	for _, i := range insts {
		seen[i.Name] = true
	}
	if !seen["u4001.a-vm"] {
		c.failed = true
		fmt.Printf("FAIL: vm show lists %v, want every instance (A's as u4001.a-vm)\n", seen)
	}
	_, err = vrdma.Open("vrdma0", vrdma.Options{Instance: "u4001.a-vm"})
	c.expect("attach to A's instance (which it sees)", err, vrdma.ErrPermission)
	_, err = adm.CreateInstance(vrdma.InstanceSpec{Name: "adm-spy", Adapters: 1, TrustGroup: "u4001.ga"})
	c.expect("join A's trust group (u4001.ga: a name of A's)", err, vrdma.ErrInvalidArgument)
	c.expect("link delete (allowed; there is none)", adm.DeleteLink("nope"), vrdma.ErrNotFound)
	_, err = adm.SwitchInstances()
	c.expect("vm show --all (allowed; there is no switch)", err, vrdma.ErrInvalidState)
	c.expect("delete A's instance (only its owner and root may)", adm.DeleteInstance("u4001.a-vm"), vrdma.ErrPermission)
	return c.exit()
}

// cqHog opens the default instance's vrdma0 and creates CQs until it is
// refused, prints "COUNT MAXCQ" and the refusal, and holds them until its
// stdin closes.
func cqHog() int {
	dev, err := vrdma.Open("vrdma0")
	if err != nil {
		fmt.Println("FAIL: open:", err)
		return 1
	}
	attr, err := dev.Query()
	if err != nil {
		fmt.Println("FAIL: query:", err)
		return 1
	}
	var cqs []*vrdma.CQ
	for {
		cq, err := dev.CreateCQ(1)
		if err != nil {
			fmt.Printf("%d %d\n%v\n", len(cqs), attr.MaxCQ, err)
			if !errors.Is(err, vrdma.ErrLimit) {
				fmt.Println("FAIL: the refusal is not ErrLimit")
			}
			break
		}
		cqs = append(cqs, cq)
	}
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	return 0
}

// sessionHog opens admin connections until it is refused, prints the
// count and the refusal, and holds them until its stdin closes.
func sessionHog() int {
	var adms []*vrdma.Admin
	for {
		adm, err := vrdma.DialAdmin(vrdma.Options{})
		if err != nil {
			fmt.Printf("%d\n%v\n", len(adms), err)
			if !errors.Is(err, vrdma.ErrLimit) {
				fmt.Println("FAIL: the refusal is not ErrLimit")
			}
			break
		}
		adms = append(adms, adm)
	}
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	return 0
}

// fdHog, against a daemon short of descriptors, creates CQs, then opens
// sessions, each until refused; it prints both refusals and holds
// everything until its stdin closes.
func fdHog() int {
	dev, err := vrdma.Open("vrdma0")
	if err != nil {
		fmt.Println("FAIL: open:", err)
		return 1
	}
	var cqs []*vrdma.CQ
	for {
		cq, err := dev.CreateCQ(1)
		if err != nil {
			fmt.Printf("cq %d: %v\n", len(cqs), err)
			if !errors.Is(err, vrdma.ErrLimit) {
				fmt.Println("FAIL: the refusal is not ErrLimit")
			}
			break
		}
		cqs = append(cqs, cq)
	}
	var adms []*vrdma.Admin
	for {
		adm, err := vrdma.DialAdmin(vrdma.Options{})
		if err != nil {
			fmt.Printf("session %d: %v\n", len(adms), err)
			if !errors.Is(err, vrdma.ErrLimit) {
				fmt.Println("FAIL: the refusal is not ErrLimit")
			}
			break
		}
		adms = append(adms, adm)
	}
	fmt.Println("holding")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	return 0
}

// lowFDDaemon runs a daemon under an RLIMIT_NOFILE of VRDMA_NOFILE, with
// no session or CQ limit of its own, so that only descriptors bound its
// clients. It runs as a user who cannot raise the limit again.
func lowFDDaemon() int {
	var n uint64
	fmt.Sscan(os.Getenv("VRDMA_NOFILE"), &n)
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: n, Max: n}); err != nil {
		fmt.Println("setrlimit:", err)
		return 1
	}
	d, err := daemon.New(daemon.Config{SocketPath: os.Getenv("VRDMA_SOCKET"), SocketMode: 0o666, HostName: "itest",
		UserLimits: daemon.Limits{daemon.Sessions: daemon.Unlimited, daemon.CQs: daemon.Unlimited}})
	if err != nil {
		fmt.Println("daemon:", err)
		return 1
	}
	var lim unix.Rlimit
	_ = unix.Getrlimit(unix.RLIMIT_NOFILE, &lim)
	fmt.Printf("ready %d\n", lim.Cur)
	if err := d.Serve(); err != nil {
		fmt.Println("serve:", err)
		return 1
	}
	return 0
}
