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

// Where the daemon's TCP listeners (the TCP channel and the connection
// manager) listen, and who may use them — DESIGN.md's "Who is trusted":
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
//     host's (switchagent.Agent.Authorize; newAgent gives it to the
//     connection manager, with the switch's certificates).
//
// The policy is the daemon's: it places both listeners, and the connection
// manager's exists on a daemon with no switch too. What it asks of the
// switch is package switchagent's: whether the switch can have another
// host (Config.SingleHost) and which addresses the host publishes
// (HostAddrs).

// ErrInsecureListener is the error of a listener beyond loopback without
// the switch's certificates and without Insecure.
var ErrInsecureListener = errors.New("daemon: a listener beyond loopback without mutual TLS")

// applyListenPolicy fills in the listeners' default addresses (the switch's
// in Config.Switch, before the agent is made) and checks them against the
// policy above.
func (d *Daemon) applyListenPolicy() error {
	cfg, sw := &d.cfg, &d.cfg.Switch
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
	} else if cfg.CMListen == "" {
		// With no switch there is nobody to check a peer against: the CM
		// serves this host's adapters only unless told otherwise.
		cfg.CMListen = CMListenOff
	}
	// The address a daemon publishes and listens on by default.
	home := netip.MustParseAddr("127.0.0.1")
	if sw.Enable && !sw.SingleHost() {
		home = sw.TCPAddrs[0]
	}
	if sw.Enable && sw.TCPListen == "" {
		sw.TCPListen = net.JoinHostPort(home.String(), strconv.Itoa(tcplink.DefaultPort))
	}
	if cfg.CMListen == "" {
		// A default that is taken is no error: the CM then serves this
		// host's adapters only (connmgr.New warns).
		cfg.CMListen = net.JoinHostPort(home.String(), strconv.Itoa(DefaultCMPort))
		d.cmListenDefault = true
	}
	secure := sw.Enable && sw.Member != nil
	type listener struct{ flag, addr string }
	var ls []listener
	if sw.Enable {
		ls = append(ls, listener{"--tcp-listen", sw.TCPListen})
	}
	if cfg.CMListen != CMListenOff {
		ls = append(ls, listener{"--cm-listen", cfg.CMListen})
	}
	for _, l := range ls {
		if secure || isLoopbackListen(l.addr) {
			continue
		}
		if !sw.Insecure {
			why := "give it the switch's certificates (--pki: `vrdma switch ca init`, `vrdma host cert`)"
			if !sw.Enable {
				why = "a daemon on no switch has no certificates to check peers with"
			}
			return fmt.Errorf("%w: %s %s would let anyone who reaches that address pose as a host: %s, listen on loopback, or pass --insecure on an isolated test network", ErrInsecureListener, l.flag, l.addr, why)
		}
		d.log.Warn("INSECURE: listening beyond loopback without TLS: anyone who reaches this address may pose as a host of the switch", "listener", l.flag, "addr", l.addr)
	}
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
