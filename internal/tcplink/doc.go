// Package tcplink is vrdma's TCP channel: the fallback path between two
// host daemons when at least one has no RDMA uplink. A Link implements
// engine.Link over TCP: the engine's frames — whole IPv4 or IPv6 packets,
// UDP, BTH ... ICRC, exactly as package wire encodes them — travel inside
// one TCP connection per pair of daemons, which carries all their QPs' RC,
// UC and UD traffic. The ICRC stays in the frames; the receiving engine
// checks it over plain TCP, and not over TLS, whose AEAD already
// authenticates every byte (Link.FramesIntact).
//
// The protocol (protocol.go has the byte layout): each side opens with a
// hello — magic "vRtc", version 1, a random link ID, a random nonce for the
// connection and its GIDs, so the receiver knows which peer it is and
// which addresses route to it — then sends frames as a 4-byte big-endian
// length and the packet. Length 0 is a keepalive. Anything else out of
// place (no hello, another version, a length above MaxFrame, bytes that are
// not one whole IP packet, a stream cut mid-frame) closes that connection
// with a logged reason and a counter; the link keeps serving the others.
//
// Who gets in (identity.go, and package admit): an incoming connection
// first needs a handshake slot — at most Config.Handshakes.PerSource per
// source address and Total in all, the oldest cut when all are taken —
// and every read before it is authorized has a deadline. After TLS and
// the hello, Config.Authorize names the peer (its identity: the host name
// the switch knows it by) or refuses it; without an Authorizer the
// identity is the remote address. Peers are keyed by identity: a
// connection attaches to the peer of its identity only, so a newcomer of
// another identity never takes a live peer's place, whatever link ID or
// addresses it announces; an address another live peer holds, or that
// Config.Peers places at another identity, refuses the hello. An
// outgoing connection must reach the identity Config.Peers expects at the
// endpoint.
//
// Peers are found by destination address: an address a connected peer
// announced in its hello, else Config.Peers, which resolves an address to
// the TCP endpoint of the daemon that has it and the identity expected
// there. The first frame for a peer dials it; when both sides dial at
// once, both keep the connection whose dialler ranks first (lowest GID,
// then link ID, then nonce) and close their side of the other, after the
// frames already sent on it. A peer that restarts shows a new link ID,
// which retires its old connection. A peer with no connection, nothing
// queued and no traffic for Config.PeerIdle is forgotten.
//
// Each peer has a bounded send queue: WriteBatch copies frames into it and
// never blocks (a full queue drops, as a NIC ring does; the RC transport
// sends again; its READ responses wait for room, Link.QueueRoom) and the peer's writer goroutine writes all that is queued
// with one write, dials when there is no connection (backing off 20 ms to
// 2 s after failures) and sends a keepalive on a connection idle for
// Config.KeepAlive. A peer silent for DeadAfter keepalive intervals is
// declared dead. Each connection has a reader goroutine that delivers
// frames in place from its read buffer; the readers take turns (a mutex),
// since the engine's receiver is single-threaded. Optional TLS wraps
// every connection, mutual when Config.TLS has ClientCAs; its records are
// kept and written by the link like plain frames (seal.go), so they go
// out many per write(2) and take direct writes too.
//
// Steady state allocates nothing per frame. docs/design/tcp-channel.md
// tells why it is built this way and what it measured.
//
//	l, err := tcplink.Open(tcplink.Config{
//		Name:  "tcp0",
//		Addrs: []netip.Addr{netip.MustParseAddr("10.0.0.1")},
//		Peers: func(dst netip.Addr) (admit.Endpoint, bool) {
//			h, ok := records[dst] // the switch's host records
//			return admit.Endpoint{Addr: h.TCPEndpoint, Identity: h.Name}, ok
//		},
//		Authorize: func(p admit.Peer) (string, error) {
//			return memberNamed(p.Chain, p.Addrs) // the leaf's host, if its record has p.Addrs
//		},
//		TLS: mutualTLS,
//	})
//	if err != nil { ... }
//	err = daemon.AttachLink(l) // or: go l.Serve(deliver); l.WriteBatch(frames)
//	...
//	l.Close()
package tcplink
