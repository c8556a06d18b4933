package tcplink

import (
	"net/netip"
	"sync/atomic"
	"time"
)

// Stats are a link's counters since Open.
type Stats struct {
	FramesOut, BytesOut uint64 // frames (and their bytes) written to connections
	FramesIn, BytesIn   uint64 // frames delivered to Serve's callback
	Pings               uint64 // keepalives received

	Connects   uint64 // connections that completed the hello, either direction
	Reconnects uint64 // of them, to a peer that had had a connection before
	DialErrors uint64 // outgoing connections refused or timed out before the hello
	// HandshakeErrors: connections closed before their hello completed: TLS
	// refused, not a hello, a version we do not speak, a connection to
	// ourselves, too slow.
	HandshakeErrors uint64
	// HandshakesRefused: incoming connections closed at once because
	// their source had Config.Handshakes.PerSource in their handshake.
	HandshakesRefused uint64
	// HandshakesCut: incoming connections cut in their handshake to admit
	// a newer one, Config.Handshakes.Total being in theirs.
	HandshakesCut uint64
	// Unauthorized: connections refused after their hello: Authorize
	// refused them, or their hello announced an address another live
	// peer holds or Config.Peers places at another identity.
	Unauthorized uint64
	// WrongPeer: outgoing connections refused because the endpoint
	// answered as another identity than Config.Peers expected there.
	WrongPeer uint64
	// PeerLimit: connections from a new identity refused because the link
	// knew Config.MaxPeers peers, none of them idle.
	PeerLimit uint64
	// PeersForgotten: peers forgotten after Config.PeerIdle without a
	// connection, queued frames or traffic.
	PeersForgotten uint64
	// LogsSuppressed: log lines about connections (refusals, connects,
	// disconnects) left out because too many came at once.
	LogsSuppressed uint64
	// ProtocolErrors: connections closed for a bad frame: a length above
	// MaxFrame, bytes that are not a whole IP packet, a stream cut
	// mid-frame.
	ProtocolErrors uint64
	// Spoofed: frames dropped because their source address is not one the
	// peer's hello announced (and Authorize accepted): another host's,
	// this host's, or nobody's.
	Spoofed    uint64
	Timeouts   uint64 // connections closed because the peer was silent
	Duplicates uint64 // connections given up by the tie-break (both sides dialled)

	// Frames dropped on the way out: for an address no peer answers for,
	// or to a peer that could not be reached; that did not fit the peer's
	// send queue; that were being written when the connection failed.
	DroppedNoPeer, DroppedQueueFull, DroppedConnLost uint64
	BadFramesOut                                     uint64 // frames WriteBatch refused as malformed

	// DirectWrites: queues WriteBatch wrote on its own goroutine (direct.go);
	// DirectShort: of them, those the socket took only part of, the rest
	// left to the writer.
	DirectWrites, DirectShort uint64
}

type counters struct {
	framesOut, bytesOut, framesIn, bytesIn, pings     atomic.Uint64
	connects, reconnects, dialErrors, handshakeErrors atomic.Uint64
	protocolErrors, timeouts, duplicates, spoofed     atomic.Uint64
	droppedNoPeer, droppedQueueFull, droppedConnLost  atomic.Uint64
	badFramesOut                                      atomic.Uint64
	directWrites, directShort                         atomic.Uint64
	unauthorized, wrongPeer, peerLimit, forgotten     atomic.Uint64
}

func (c *counters) snapshot() Stats {
	return Stats{
		FramesOut: c.framesOut.Load(), BytesOut: c.bytesOut.Load(),
		FramesIn: c.framesIn.Load(), BytesIn: c.bytesIn.Load(), Pings: c.pings.Load(),
		Connects: c.connects.Load(), Reconnects: c.reconnects.Load(), DialErrors: c.dialErrors.Load(),
		HandshakeErrors: c.handshakeErrors.Load(), ProtocolErrors: c.protocolErrors.Load(),
		Timeouts: c.timeouts.Load(), Duplicates: c.duplicates.Load(), Spoofed: c.spoofed.Load(),
		DroppedNoPeer: c.droppedNoPeer.Load(), DroppedQueueFull: c.droppedQueueFull.Load(),
		DroppedConnLost: c.droppedConnLost.Load(), BadFramesOut: c.badFramesOut.Load(),
		DirectWrites: c.directWrites.Load(), DirectShort: c.directShort.Load(),
		Unauthorized: c.unauthorized.Load(), WrongPeer: c.wrongPeer.Load(), PeerLimit: c.peerLimit.Load(),
		PeersForgotten: c.forgotten.Load(),
	}
}

// PeerState is what a link knows about one peer, for display.
type PeerState struct {
	// Identity is who the peer is: what Config.Authorize named it (its
	// remote address without one); before its first connection, the
	// identity expected at Endpoint.
	Identity string
	// Endpoint is the TCP endpoint the link dials for the peer; "" for a
	// peer known only from a connection it opened.
	Endpoint string
	// Addrs are the addresses that route to the peer: those its last
	// hello announced, then those Config.Peers resolved to it.
	Addrs []netip.Addr
	// State is "up" (a connection is open), "connecting", "backoff" (the
	// last attempt failed; the next waits) or "idle" (no connection, and
	// nothing to send).
	State    string
	Since    time.Time // when State began
	Outgoing bool      // "up": this side dialled the connection
	Local    string    // "up": the connection's local address
	Remote   string    // "up": the connection's remote address
	Queued   int       // bytes waiting in the send queue
	Connects int       // connections the peer has had
	// LastError is why the peer's last connection ended or the last
	// attempt failed; nil if none did.
	LastError error
}
