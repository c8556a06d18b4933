package fabric

import (
	"fmt"
	"os"
	"strings"
)

// Identity is what decides whether two host records describe the same
// host — that is, whether two adapters can reach each other's memory with a
// memcpy in one daemon rather than over a link.
//
// Two identities are the same host when all three fields are equal:
//
//   - MachineID (/etc/machine-id): the same installed system;
//   - BootID (/proc/sys/kernel/random/boot_id): the same running kernel, so
//     shared memory (memfd) and unix sockets reach across — a rebooted host
//     is a new incarnation whose QPs are all gone;
//   - NetNS (the inode of /proc/self/ns/net): the same network namespace,
//     so that daemons that tests start in separate namespaces of one kernel
//     count as separate hosts, the way separate machines would.
//
// The host name is not part of it: a name is what people call a host; the
// identity is what the kernel says it is.
type Identity struct {
	MachineID string `json:"machineID"`
	BootID    string `json:"bootID"`
	NetNS     string `json:"netns,omitempty"`
}

// SameHost reports whether a and b are the same host in the same boot and
// network namespace. An empty identity is never the same as anything.
func (a Identity) SameHost(b Identity) bool {
	return a.MachineID != "" && a.BootID != "" &&
		a.MachineID == b.MachineID && a.BootID == b.BootID && a.NetNS == b.NetNS
}

// SameMachine reports whether a and b are the same installed system,
// possibly in another boot or namespace.
func (a Identity) SameMachine(b Identity) bool {
	return a.MachineID != "" && a.MachineID == b.MachineID
}

func (a Identity) String() string {
	s := shortID(a.MachineID) + "/" + shortID(a.BootID)
	if a.NetNS != "" {
		s += "/" + a.NetNS
	}
	return s
}

func shortID(s string) string {
	if len(s) > 8 {
		return s[:8]
	}
	return s
}

// LocalIdentity reads the identity of the host this process runs on.
func LocalIdentity() (Identity, error) {
	var id Identity
	var err error
	if id.MachineID, err = readFirst("/etc/machine-id", "/var/lib/dbus/machine-id"); err != nil {
		return id, fmt.Errorf("fabric: host identity: no machine id (%w); create one with `systemd-machine-id-setup` or `dbus-uuidgen --ensure=/etc/machine-id`", err)
	}
	if id.BootID, err = readFirst("/proc/sys/kernel/random/boot_id"); err != nil {
		return id, fmt.Errorf("fabric: host identity: no boot id (%w); is /proc mounted?", err)
	}
	id.BootID = strings.ReplaceAll(id.BootID, "-", "")
	if ns, err := os.Readlink("/proc/self/ns/net"); err == nil {
		id.NetNS = ns
	}
	return id, nil
}

func readFirst(paths ...string) (string, error) {
	var first error
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err == nil {
			if s := strings.TrimSpace(string(b)); s != "" {
				return s, nil
			}
			err = fmt.Errorf("%s is empty", p)
		}
		if first == nil {
			first = err
		}
	}
	return "", first
}
