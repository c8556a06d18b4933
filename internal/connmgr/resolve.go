package connmgr

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"

	"github.com/vrdma/vrdma/internal/admit"
	"github.com/vrdma/vrdma/internal/cm"
)

// DefaultPort is the TCP port of the connection manager.
const DefaultPort = cm.DefaultPort

// Resolver maps the address of a remote adapter (a GID; IPv4 unmapped)
// to the TCP endpoint, host:port, of its daemon's connection manager.
type Resolver func(addr netip.Addr) (string, error)

// PeerResolver is a Resolver that also names the daemon expected at the
// endpoint (admit.Endpoint.Identity), which Config.Authorize must name
// there for a connection to go on.
type PeerResolver func(addr netip.Addr) (admit.Endpoint, error)

// Endpoints returns r as a PeerResolver whose endpoints name no identity.
func (r Resolver) Endpoints() PeerResolver {
	return func(a netip.Addr) (admit.Endpoint, error) {
		ep, err := r(a)
		return admit.Endpoint{Addr: ep}, err
	}
}

// DefaultResolve reaches the daemon at the adapter's address itself, on
// DefaultPort.
func DefaultResolve(addr netip.Addr) (string, error) {
	if addr.Is6() && addr.IsLinkLocalUnicast() && addr.Zone() == "" {
		return "", fmt.Errorf("%s is link-local and says nothing of the interface it is on: dial one of the adapter's routable addresses (an IPv4 GID ::ffff:a.b.c.d, say)", addr)
	}
	return net.JoinHostPort(addr.String(), strconv.Itoa(DefaultPort)), nil
}
