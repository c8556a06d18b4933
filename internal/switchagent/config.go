package switchagent

import (
	"crypto/tls"
	"net/netip"
	"net/url"
	"time"

	"github.com/vrdma/vrdma/internal/fabric"
	"github.com/vrdma/vrdma/internal/pki"
)

// DefaultSwitch is the name of the switch a daemon joins unless told
// otherwise.
const DefaultSwitch = "vrdma"

// DefaultPortGroup is the port group every switch has and adapters join
// unless told otherwise.
const DefaultPortGroup = "default"

// TCPLinkName is the name of the TCP channel's link.
const TCPLinkName = "tcp"

// Config says how a daemon joins the distributed switch. The zero value
// joins none: the daemon then serves its own host only (memcpy, and
// RoCEv2 to peers addressed by hand). The daemon's Config.Switch is one
// (daemon.SwitchConfig is an alias).
type Config struct {
	// Enable joins the switch; the daemon starts an agent only then.
	Enable bool
	Name   string // the switch; "" = DefaultSwitch

	// Endpoints are the etcd client URLs of an existing cluster; none
	// runs an etcd member inside the daemon (Embed, EtcdDir).
	Endpoints []string
	TLS       *tls.Config // client TLS towards Endpoints
	Embed     fabric.EmbedOptions
	// EtcdDir holds the embedded member's data: "" = STATE-DIR/etcd, or a
	// temporary directory removed at Close when there is no state
	// directory.
	EtcdDir string

	SMPriority int // the subnet manager's election priority, 0..15 (OpenSM's)

	// TCPListen is where the TCP channel listens: "" = ":4792" (the
	// daemon's listen policy fills it in).
	TCPListen string
	// TCPAddrs are the host addresses the TCP channel answers for (and
	// the GIDs the adapters get from it); none = every address of the
	// host's interfaces that are up, loopback last (HostAddrs; the
	// daemon's listen policy fills them in).
	TCPAddrs []netip.Addr

	// Member is this host's certificate of the switch (package pki). With
	// it, the TCP channel, the connection manager and etcd between hosts
	// run mutual TLS, and a peer is the host its certificate names.
	// Without it, nothing listens beyond loopback unless Insecure.
	Member *pki.Member
	// Insecure lets the TCP channel, the connection manager and etcd use
	// plaintext on addresses other hosts reach: anyone there may then pose
	// as a host of the switch. For isolated test networks only.
	Insecure bool

	// HostTag, if set, is added to this host's identity, so that two
	// daemons in one network namespace count as two hosts (the demo runs
	// two in one process); leave it empty on real hosts.
	HostTag string

	HostTTL time.Duration // the host record's lease (0: fabric.DefaultHostTTL)
	Grace   time.Duration // how long a vanished host may come back (0: fabric.DefaultGrace)
}

// SingleHost reports whether the switch can have no other host: its etcd
// is embedded, alone, and serves clients on its socket or on loopback.
// The daemon's listeners then stay on loopback.
func (c *Config) SingleHost() bool {
	if len(c.Endpoints) > 0 || c.Embed.InitialCluster != "" {
		return false
	}
	u, err := url.Parse(c.Embed.ClientURL)
	if c.Embed.ClientURL == "" || err == nil && u.Scheme == "unix" {
		return true
	}
	a, err := netip.ParseAddr(u.Hostname())
	return err == nil && a.IsLoopback()
}
