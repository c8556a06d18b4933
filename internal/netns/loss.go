package netns

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
)

// RoCEv2Port is the UDP destination port of every RoCEv2 packet; SetLoss
// drops only datagrams to it.
const RoCEv2Port = 4791

// lossHook is one place where SetLoss drops packets: an nftables table of
// the netdev family in namespace ns, with one base chain on iface.
type lossHook struct {
	ns, iface string
	hook      string // "ingress" or "egress"
}

// lossTable names the host's nftables tables (one per namespace it uses).
func (h *Host) lossTable() string {
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' {
			return r
		}
		return '_'
	}, h.Name)
	return "vrdma_loss_" + name
}

// lossHooks: datagrams entering the host are dropped at its interface's
// ingress; datagrams leaving it at the ingress of the other end of its veth,
// so that the sender (whatever its socket) sees no error, as on a real
// lossy link. An Existing host has no known other end: egress, where a
// packet socket's send of a dropped frame fails with ENOBUFS.
func (h *Host) lossHooks() []lossHook {
	out := lossHook{h.NS, h.Iface, "egress"}
	if h.peerNS != "" {
		out = lossHook{h.peerNS, h.peerIface, "ingress"}
	}
	return []lossHook{{h.NS, h.Iface, "ingress"}, out}
}

// lossNamespaces are the namespaces holding the host's table (one or two).
func (h *Host) lossNamespaces() []string {
	ns := []string{h.NS}
	if h.peerNS != "" && h.peerNS != h.NS {
		ns = append(ns, h.peerNS)
	}
	return ns
}

// SetLoss makes percent % of the UDP datagrams to port 4791 (RoCEv2, IPv4
// and IPv6) that leave or enter the host's interface vanish, each one
// independently (nftables' `numgen random mod 100 < percent`). 0 removes the
// loss, 100 drops them all. Dropped counts the datagrams dropped; the
// nftables tables are deleted when the test ends. SetLoss skips the test if
// nftables is not installed.
func (h *Host) SetLoss(t testing.TB, percent int) {
	t.Helper()
	if percent < 0 || percent > 100 {
		t.Fatalf("SetLoss(%d): want 0 to 100", percent)
	}
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("netns: SetLoss needs nft: apt-get install nftables")
	}
	if percent == 0 && !h.lossSet {
		return
	}
	table := h.lossTable()
	if !h.lossSet {
		h.lossSet = true
		t.Cleanup(func() {
			for _, ns := range h.lossNamespaces() {
				if out, err := exec.Command("ip", "netns", "exec", ns, "nft", "delete", "table", "netdev", table).CombinedOutput(); err != nil {
					t.Errorf("netns: deleting nftables table %s in %s: %v: %s", table, ns, err, out)
				}
			}
		})
	}
	match := fmt.Sprintf("numgen random mod 100 < %d ", percent)
	if percent == 100 {
		match = "" // numgen's range is 0-99: "< 100" is refused
	}
	for _, l := range h.lossHooks() {
		var script strings.Builder
		fmt.Fprintf(&script, "add table netdev %s\n", table)
		fmt.Fprintf(&script, "add counter netdev %s dropped\n", table)
		fmt.Fprintf(&script, "add chain netdev %s %s { type filter hook %s device %q priority -100; policy accept; }\n", table, l.hook, l.hook, l.iface)
		fmt.Fprintf(&script, "flush chain netdev %s %s\n", table, l.hook)
		if percent > 0 {
			fmt.Fprintf(&script, "add rule netdev %s %s udp dport %d %scounter name \"dropped\" drop\n", table, l.hook, RoCEv2Port, match)
		}
		cmd := exec.Command("ip", "netns", "exec", l.ns, "nft", "-f", "-")
		cmd.Stdin = strings.NewReader(script.String())
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("netns: SetLoss(%d) on %s: nft in %s: %v: %s\nscript:\n%s", percent, h.Name, l.ns, err, out, script.String())
		}
	}
}

// Dropped returns how many datagrams SetLoss's rules have dropped on this
// host so far, both ways, since its first SetLoss (0 before).
func (h *Host) Dropped(t testing.TB) int {
	t.Helper()
	if !h.lossSet {
		return 0
	}
	total := 0
	for _, ns := range h.lossNamespaces() {
		out, err := exec.Command("ip", "netns", "exec", ns, "nft", "-j", "list", "counter", "netdev", h.lossTable(), "dropped").Output()
		if err != nil {
			t.Fatalf("netns: reading the drop counter of %s in %s: %v", h.Name, ns, err)
		}
		n, err := parseCounter(out)
		if err != nil {
			t.Fatalf("netns: %v in nft's output %s", err, out)
		}
		total += n
	}
	return total
}

// parseCounter reads the packet count out of `nft -j list counter` output.
func parseCounter(js []byte) (int, error) {
	var v struct {
		Nftables []struct {
			Counter *struct {
				Packets int `json:"packets"`
			} `json:"counter"`
		} `json:"nftables"`
	}
	if err := json.Unmarshal(js, &v); err != nil {
		return 0, err
	}
	for _, o := range v.Nftables {
		if o.Counter != nil {
			return o.Counter.Packets, nil
		}
	}
	return 0, fmt.Errorf("no counter")
}
