package admit

import (
	"crypto/x509"
	"net/netip"
)

// Peer is what a listener or a dialler knows of the other end of a
// connection once its handshake is done, for an Authorizer to judge.
type Peer struct {
	// Remote is the connection's remote address (unmapped, no zone).
	Remote netip.AddrPort
	// Outgoing: this side dialled the connection.
	Outgoing bool
	// Endpoint is, for an outgoing connection, the endpoint dialled
	// ("host:port", as the resolver gave it).
	Endpoint string
	// Expected is, for an outgoing connection, the identity the resolver
	// said is at Endpoint ("" if it named none). The caller refuses a
	// connection whose identity is not this one whatever the Authorizer
	// says; it is here so the Authorizer can say more.
	Expected string
	// Chain is the peer's certificate chain as this side verified it
	// against its CAs, leaf first; nil without TLS, or when the peer
	// presented no certificate (a server that does not ask for one).
	Chain []*x509.Certificate
	// Addrs are the addresses the peer announced it answers for (the TCP
	// channel's hello: its GIDs, IPv4 unmapped); nil where the protocol
	// announces none (the connection manager).
	Addrs []netip.Addr
}

// Authorizer names the peer of a connection or refuses it. It returns the
// peer's identity — the host name the switch knows it by — or an error
// that says why the connection is refused (logged, and counted). It is
// called once per connection, after TLS and before the connection carries
// anything, on the connection's goroutine: it may take a moment, but
// every connection in its handshake holds a slot of the Gate meanwhile.
//
// An Authorizer for a switch checks that the certificate's leaf names a
// live host, and that every address in Addrs is one of that host's in its
// record: the addresses it accepts route to the identity it returns.
type Authorizer func(p Peer) (identity string, err error)

// Endpoint is where a resolver says a peer listens, and whose identity is
// expected there.
type Endpoint struct {
	Addr     string // "host:port"
	Identity string // the peer's identity; "" if the resolver names none
}
