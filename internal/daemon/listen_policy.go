package daemon

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/vrdma/vrdma/internal/pki"
	"github.com/vrdma/vrdma/internal/switchagent"
	"github.com/vrdma/vrdma/internal/tcplink"
)

// Where the daemon's TCP listener (the TCP channel) listens, and who may
// use it — DESIGN.md's "Who is trusted":
//
//   - A daemon whose switch can have no other host (its etcd embedded and
//     reachable only through the daemon's private socket) listens on
//     loopback.
//   - A daemon of a multi-host switch listens on the address it publishes
//     in its host record (the first of its addresses), not on every one.
//   - A listener beyond loopback needs the switch's certificates (mutual
//     TLS; a peer is the host its certificate names), or the operator's
//     explicit, logged --insecure.
//   - On a switch, every connection is authorized against the host
//     records: its identity must be a live host and what it announces that
//     host's (switchagent.Agent.Authorize).
//
// The policy is the daemon's. What it asks of the switch is package
// switchagent's: whether the switch can have another
// host (Config.SingleHost) and which addresses the host publishes
// (HostAddrs).

// ErrInsecureListener is the error of a listener beyond loopback without
// the switch's certificates and without Insecure.
var ErrInsecureListener = errors.New("daemon: a listener beyond loopback without mutual TLS")

// applyListenPolicy fills in the listeners' default addresses (the switch's
// in Config.Switch, before the agent is made) and checks them against the
// policy above.
func (d *Daemon) applyListenPolicy() error {
	sw := &d.cfg.Switch
	if sw.Enable {
		given := len(sw.TCPAddrs) > 0
		if !given {
			addrs, err := switchagent.HostAddrs()
			if err != nil {
				return fmt.Errorf("switch: the host's addresses: %w", err)
			}
			sw.TCPAddrs = addrs
		}
		if sw.Member != nil && !sw.SingleHost() {
			// The other hosts take only the addresses this host's
			// certificate lists: publish and listen on those.
			addrs, err := coveredAddrs(sw, given)
			if err != nil {
				return err
			}
			sw.TCPAddrs = addrs
		}
	}
	// The address a daemon publishes and listens on by default.
	home := netip.MustParseAddr("127.0.0.1")
	if sw.Enable && !sw.SingleHost() {
		home = sw.TCPAddrs[0]
	}
	if sw.Enable && sw.TCPListen == "" {
		sw.TCPListen = net.JoinHostPort(home.String(), strconv.Itoa(tcplink.DefaultPort))
	}
	if !sw.Enable || sw.Member != nil || isLoopbackListen(sw.TCPListen) {
		return nil
	}
	if !sw.Insecure {
		return fmt.Errorf("%w: --tcp-listen %s would let anyone who reaches that address pose as a host: give it the switch's certificates (--pki: `vrdma switch ca init`, `vrdma host cert`), listen on loopback, or pass --insecure on an isolated test network", ErrInsecureListener, sw.TCPListen)
	}
	d.log.Warn("INSECURE: listening beyond loopback without TLS: anyone who reaches this address may pose as a host of the switch", "listener", "--tcp-listen", "addr", sw.TCPListen)
	return nil
}

// isLoopbackListen reports whether a listen address ("host:port") is on
// loopback only.
func isLoopbackListen(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	host = strings.Trim(host, "[]")
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}

// coveredAddrs keeps the host's addresses its certificate lists; given:
// the operator named them (--tcp-addr), so one it does not list is an
// error rather than left out.
func coveredAddrs(sw *SwitchConfig, given bool) ([]netip.Addr, error) {
	m := sw.Member
	var keep, left []netip.Addr
	for _, a := range sw.TCPAddrs {
		if pki.Covers(m.Leaf, a) {
			keep = append(keep, a)
		} else {
			left = append(left, a)
		}
	}
	fix := fmt.Sprintf("issue it a certificate that lists them: vrdma host cert %s --ip ADDR,... (where the switch's CA is)", m.Host)
	switch {
	case given && len(left) > 0:
		return nil, fmt.Errorf("switch: --tcp-addr %v: host %s's certificate does not list them, so the other hosts would not route to them: %s", left, m.Host, fix)
	case len(keep) == 0:
		return nil, fmt.Errorf("switch: host %s's certificate lists none of its addresses (%v), so no other host would route to it: %s", m.Host, sw.TCPAddrs, fix)
	}
	return keep, nil
}
