package switchagent

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"

	"github.com/vrdma/vrdma/internal/tcplink"
)

// openTCP opens the TCP channel and attaches it as a link.
func (a *Agent) openTCP() error {
	addrs := a.cfg.TCPAddrs // filled in by the daemon's listen policy
	a.tcpAddrs = addrs
	var t *tls.Config
	if a.cfg.Member != nil {
		t = a.cfg.Member.TLSConfig()
	}
	l, err := tcplink.Open(tcplink.Config{Name: TCPLinkName, Addrs: addrs, Listen: a.cfg.TCPListen,
		Peers: a.peerEndpoint, GroupHosts: a.multicastHosts, TLS: t, Authorize: a.Authorize, Logger: a.log})
	if flag := inUseFlag(err, nil); flag != "" {
		return fmt.Errorf("switch: TCP channel: %w: another program uses the port; choose another with %s", err, flag)
	}
	if err != nil {
		return fmt.Errorf("switch: TCP channel: %w (give --tcp-listen another address, or stop what holds the port)", err)
	}
	if err := a.host.AttachLink(l); err != nil {
		l.Close()
		return fmt.Errorf("switch: TCP channel: %w", err)
	}
	a.tcp = l
	return nil
}

// HostAddrs lists the addresses of the interfaces that are up, loopback
// only if there is no other; link-local IPv6 ones (which need a zone) are
// left out. They are what the TCP channel answers for when
// Config.TCPAddrs names none.
func HostAddrs() ([]netip.Addr, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	var global, loop []netip.Addr
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagUp == 0 {
			continue
		}
		as, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range as {
			pfx, err := netip.ParsePrefix(a.String())
			if err != nil {
				continue
			}
			ip := pfx.Addr()
			switch {
			case ip.IsLinkLocalUnicast() || ip.IsMulticast():
			case ip.IsLoopback():
				loop = append(loop, ip)
			default:
				global = append(global, ip)
			}
		}
	}
	// Loopback is this host's only when the host has nothing else: other
	// hosts have it too.
	if len(global) > 0 {
		return global, nil
	}
	if len(loop) == 0 {
		return nil, errors.New("no interface is up with an address: bring one up, or give --tcp-addr")
	}
	return loop, nil
}

// tcpEndpoint is the TCP channel's address as peers should dial it.
func (a *Agent) tcpEndpoint() string { return a.dialable(a.tcp.ListenAddr()) }

// dialable is a listener's address as other hosts should dial it: the
// address it listens on, or if that is every address, the first this host
// publishes.
func (a *Agent) dialable(addr net.Addr) string {
	ap, err := netip.ParseAddrPort(addr.String())
	if err != nil {
		return ""
	}
	ip := ap.Addr()
	if ip.IsUnspecified() {
		ip = a.tcpAddrs[0]
	}
	return net.JoinHostPort(ip.Unmap().String(), strconv.Itoa(int(ap.Port())))
}
