package tcplink

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/admit"
)

// DefaultPort is the TCP port a link listens on unless told otherwise: the
// RoCEv2 UDP port (4791) plus one. It is not registered with IANA; pick
// another with Config.Listen if something on the host has it.
const DefaultPort = 4792

// Defaults of the tuning fields of Config.
const (
	DefaultQueueBytes       = 1 << 20         // per peer
	DefaultKeepAlive        = 5 * time.Second // idle ping interval
	DefaultHandshakeTimeout = admit.DefaultHandshakeTimeout
	DefaultMaxPeers         = 1024
	// DeadAfter is how many keepalive intervals of silence make a peer
	// dead, and how many without a connection or traffic make a peer
	// forgotten (Config.PeerIdle).
	DeadAfter = 3
)

// Config says what a link answers for, where it listens and how it finds
// its peers.
type Config struct {
	Name string // the link's name, e.g. "tcp0"
	// Addrs are the host's addresses the link answers for: frames to them
	// come in over the link, and the link's GIDs are made of them (IPv4
	// as ::ffff:a.b.c.d, IPv6 as is). At least one.
	Addrs []netip.Addr
	// MAC, if given, puts the fe80:: EUI-64 GID of the MAC first in the
	// GID table, as rxe does for an interface.
	MAC net.HardwareAddr
	// Listen is the TCP address the link accepts connections on: "" means
	// ":4792" (DefaultPort on every address); "127.0.0.1:0" picks a free
	// port (ListenAddr says which).
	Listen string
	// Peers resolves a destination address to the TCP endpoint
	// ("host:port") of the daemon that has it, and the identity expected
	// there (Endpoint.Identity: the host name Authorize returns for it).
	// The distributed switch provides it. Nil: the link only answers
	// peers that connect to it. It is called from WriteBatch for an
	// address no connected peer has announced, and for each address a
	// hello announces, so it must be quick and must not block.
	//
	// An outgoing connection whose identity is not the expected one is
	// refused, and so is a hello that announces an address Peers places
	// at another identity. Without Authorize identities are addresses and
	// the expected identity is the endpoint's address (Endpoint.Identity
	// is not used); with Authorize, Endpoint.Identity must be given.
	Peers func(dst netip.Addr) (admit.Endpoint, bool)
	// GroupHosts returns one address of each host a datagram to the IP
	// multicast group must reach: the link sends each of them a copy, the
	// frame as it is (its destination the group). The distributed switch
	// provides it; it must be quick, must not block and must not allocate.
	// Nil: frames to groups are dropped (counted as having no peer).
	GroupHosts func(group netip.Addr) []netip.Addr
	// Authorize, if set, names the peer of every connection, in either
	// direction, after TLS and the hello exchange and before the
	// connection carries a frame: it gets the remote address, the
	// peer's verified certificate chain (nil without TLS), whether this
	// side dialled, and the addresses the hello announced, and returns the
	// peer's identity (the host name the switch knows it by) or why the
	// connection is refused (logged, and counted in Stats.Unauthorized).
	// Connections attach to the peer of their identity, and only the
	// addresses Authorize accepted route to it.
	//
	// Nil: the identity is the connection's remote IP address, and a
	// hello may announce only addresses no other live peer holds and
	// Peers places at no other identity.
	Authorize admit.Authorizer
	// TLS, if set, protects every connection: the same config serves
	// incoming connections and dials outgoing ones (its Certificates are
	// the client's certificate too). With ClientCAs set, peers must
	// present a certificate they sign (mutual TLS). An outgoing
	// connection verifies the server's certificate chain against RootCAs;
	// with Authorize set it checks no name (certificates name hosts,
	// endpoints are addresses: Authorize judges the verified chain and
	// the link checks the identity it returns is the one Peers expected),
	// without, it checks the certificate is the endpoint's host's unless
	// ServerName is set.
	TLS *tls.Config
	// MTU is the active MTU the link reports: 0 means 4096, as TCP limits
	// no frame size.
	MTU    abi.MTU
	Logger *slog.Logger // nil: slog.Default()

	// Tuning; zero picks the default.

	// QueueBytes bounds each peer's send queue (frames and their 4-byte
	// length prefixes): frames that do not fit are dropped and counted,
	// as a NIC drops on a full ring; the RC transport sends them again.
	QueueBytes int
	// KeepAlive is the idle interval after which a connection carries a
	// keepalive (an empty frame); a peer silent for DeadAfter intervals is
	// declared dead. It is also the TCP keepalive interval.
	KeepAlive time.Duration
	// HandshakeTimeout bounds connecting, TLS and the hello exchange:
	// every read before a connection is authorized has this deadline.
	HandshakeTimeout time.Duration
	// Handshakes bounds the incoming connections in their handshake, per
	// source address (a source at the limit is refused its next) and in
	// all (at the limit the oldest is cut to admit the new one). Zero
	// fields: admit's defaults, 4 per source and 64 in all.
	Handshakes admit.Limits
	// PeerIdle is how long a peer with no connection, nothing queued and
	// no traffic is kept before it is forgotten (it leaves every table,
	// and its writer ends). 0: DeadAfter keepalive intervals.
	PeerIdle time.Duration
	// MaxPeers bounds the peers known at once: a connection from a new
	// identity when that many are known, none of them idle, is refused.
	// 0: DefaultMaxPeers.
	MaxPeers int
}

// check validates c and fills in the defaults.
func (c *Config) check() error {
	if c.Name == "" {
		return fmt.Errorf("%w: no name: give the link one, e.g. \"tcp0\"", ErrConfig)
	}
	if len(c.Addrs) == 0 {
		return fmt.Errorf("%w: link %s has no addresses: give it the host addresses it answers for", ErrConfig, c.Name)
	}
	for _, a := range c.Addrs {
		switch {
		case !a.IsValid() || a.IsUnspecified():
			return fmt.Errorf("%w: link %s: address %v cannot be a GID: give the host's real addresses", ErrConfig, c.Name, a)
		case a.Zone() != "":
			return fmt.Errorf("%w: link %s: address %v has a zone: give it without %%%s", ErrConfig, c.Name, a, a.Zone())
		}
	}
	if len(c.MAC) != 0 && len(c.MAC) != 6 {
		return fmt.Errorf("%w: link %s: MAC %v is not 6 bytes long", ErrConfig, c.Name, c.MAC)
	}
	if n := len(gidTable(c.MAC, c.Addrs)); n > maxHelloAddrs {
		return fmt.Errorf("%w: link %s has %d GIDs, at most %d fit a hello: give it fewer addresses", ErrConfig, c.Name, n, maxHelloAddrs)
	}
	if c.MTU == 0 {
		c.MTU = abi.MTU4096
	}
	if !c.MTU.Valid() {
		return fmt.Errorf("%w: link %s: MTU %d is not an IB MTU (1..5: 256..4096 bytes)", ErrConfig, c.Name, c.MTU)
	}
	if c.Listen == "" {
		c.Listen = ":" + strconv.Itoa(DefaultPort)
	}
	if c.QueueBytes == 0 {
		c.QueueBytes = DefaultQueueBytes
	}
	if c.QueueBytes < 4+MaxFrame {
		return fmt.Errorf("%w: link %s: QueueBytes %d does not hold one largest frame (%d bytes)", ErrConfig, c.Name, c.QueueBytes, 4+MaxFrame)
	}
	if c.KeepAlive == 0 {
		c.KeepAlive = DefaultKeepAlive
	}
	if c.HandshakeTimeout == 0 {
		c.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if c.KeepAlive < 0 || c.HandshakeTimeout < 0 || c.PeerIdle < 0 || c.MaxPeers < 0 {
		return fmt.Errorf("%w: link %s: negative KeepAlive, HandshakeTimeout, PeerIdle or MaxPeers", ErrConfig, c.Name)
	}
	if c.PeerIdle == 0 {
		c.PeerIdle = DeadAfter * c.KeepAlive
	}
	if c.MaxPeers == 0 {
		c.MaxPeers = DefaultMaxPeers
	}
	if err := c.Handshakes.Check(); err != nil {
		return fmt.Errorf("%w: link %s: %v", ErrConfig, c.Name, err)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}
