package tcplink

import (
	"errors"
	"fmt"
	"net/netip"
)

// Errors a Link reports; match them with errors.Is. The typed errors below
// carry the details and match these.
var (
	ErrConfig   = errors.New("tcplink: invalid configuration")
	ErrClosed   = errors.New("tcplink: link closed")
	ErrServing  = errors.New("tcplink: Serve is already running")
	ErrBadFrame = errors.New("tcplink: malformed frame")
	// ErrProtocol matches every violation of the channel's protocol by a
	// peer: a bad hello, a version we do not speak, a frame length out of
	// range, a frame that is not a whole IP packet, a stream cut mid-frame.
	ErrProtocol = errors.New("tcplink: protocol error")
	// ErrVersion matches a hello with a protocol version we do not speak.
	ErrVersion = errors.New("tcplink: unsupported protocol version")
	// ErrSelf: a connection reached this link itself (a Peers entry that
	// points back at our own listener).
	ErrSelf = errors.New("tcplink: connected to itself")
	// ErrSilent: a peer sent nothing, not even a keepalive, for too long.
	ErrSilent = errors.New("tcplink: peer silent")
	// ErrNoEndpoint: frames for an address that no peer answers for.
	ErrNoEndpoint = errors.New("tcplink: no TCP endpoint for the address")
	// ErrUnauthorized: a connection was refused after its hello: the
	// Authorizer refused it, or its hello announced an address that is
	// another peer's.
	ErrUnauthorized = errors.New("tcplink: peer not authorized")
	// ErrWrongPeer: an outgoing connection reached another identity than
	// the one expected at the endpoint.
	ErrWrongPeer = errors.New("tcplink: endpoint answered as another peer")
	// ErrPeerLimit: a connection from a new identity was refused because
	// the link knew Config.MaxPeers peers, none of them idle.
	ErrPeerLimit = errors.New("tcplink: too many peers")
)

// UnauthorizedError says why a connection was refused after its hello.
type UnauthorizedError struct {
	Remote   string // the connection's remote address
	Identity string // the identity it had, if it got one
	Reason   string
	Err      error // the Authorizer's error, if it refused
}

func (e *UnauthorizedError) Error() string {
	return fmt.Sprintf("tcplink: connection from %s refused: %s", who(e.Remote, e.Identity), e.Reason)
}

// who names a connection's peer: its remote address, and its identity if
// that says more.
func who(remote, identity string) string {
	if identity == "" || identity == hostOf(remote) {
		return remote
	}
	return fmt.Sprintf("%s (%s)", remote, identity)
}

// Is makes an *UnauthorizedError match ErrUnauthorized.
func (e *UnauthorizedError) Is(target error) bool { return target == ErrUnauthorized }

// Unwrap returns the Authorizer's error.
func (e *UnauthorizedError) Unwrap() error { return e.Err }

// WrongPeerError says an outgoing connection reached another identity
// than the one Config.Peers expected at the endpoint.
type WrongPeerError struct {
	Endpoint  string
	Want, Got string
}

func (e *WrongPeerError) Error() string {
	return fmt.Sprintf("tcplink: %s answered as %q, but %q is expected there: refused, nothing is sent to it (does the switch's record of the host point at another daemon?)",
		e.Endpoint, e.Got, e.Want)
}

// Is makes a *WrongPeerError match ErrWrongPeer.
func (e *WrongPeerError) Is(target error) bool { return target == ErrWrongPeer }

// PeerLimitError says a connection from a new identity was refused because
// the link knew Limit peers, none of them idle.
type PeerLimitError struct {
	Remote, Identity string
	Limit            int
}

func (e *PeerLimitError) Error() string {
	return fmt.Sprintf("tcplink: connection from %s refused: the link knows %d peers, the most it keeps, and none is idle (raise MaxPeers if there are that many hosts)",
		who(e.Remote, e.Identity), e.Limit)
}

// Is makes a *PeerLimitError match ErrPeerLimit.
func (e *PeerLimitError) Is(target error) bool { return target == ErrPeerLimit }

// FrameError says why WriteBatch refused frame Index of a batch.
type FrameError struct {
	Index  int
	Reason string
}

func (e *FrameError) Error() string {
	return fmt.Sprintf("tcplink: frame %d: %s", e.Index, e.Reason)
}

// Is makes a *FrameError match ErrBadFrame.
func (e *FrameError) Is(target error) bool { return target == ErrBadFrame }

// ProtocolError says what a peer sent that breaks the channel's protocol.
// The link closes the connection it came on.
type ProtocolError struct {
	Remote string // the connection's remote address
	Stage  string // "hello" or "frame"
	Reason string
}

func (e *ProtocolError) Error() string {
	return fmt.Sprintf("tcplink: %s from %s: %s", e.Stage, e.Remote, e.Reason)
}

// Is makes a *ProtocolError match ErrProtocol.
func (e *ProtocolError) Is(target error) bool { return target == ErrProtocol }

// VersionError says a peer's hello asked for a protocol version this link
// does not speak.
type VersionError struct {
	Remote string
	Got    uint8
}

func (e *VersionError) Error() string {
	return fmt.Sprintf("tcplink: %s speaks TCP-channel protocol version %d, this daemon speaks version %d: run the same vrdma release on both hosts",
		e.Remote, e.Got, Version)
}

// Is makes a *VersionError match ErrVersion and ErrProtocol.
func (e *VersionError) Is(target error) bool { return target == ErrVersion || target == ErrProtocol }

// NoEndpointError says the link had frames for an address that neither a
// connected peer announced nor Config.Peers resolves.
type NoEndpointError struct{ Dst netip.Addr }

func (e *NoEndpointError) Error() string {
	return fmt.Sprintf("tcplink: no TCP endpoint for %v: frames to it are dropped until the switch knows the host that has it (or a peer with it connects)", e.Dst)
}

// Is makes a *NoEndpointError match ErrNoEndpoint.
func (e *NoEndpointError) Is(target error) bool { return target == ErrNoEndpoint }

// SilentError says a peer sent nothing for Silence and was declared dead.
type SilentError struct {
	Remote  string
	Silence string
}

func (e *SilentError) Error() string {
	return fmt.Sprintf("tcplink: %s sent nothing (not even a keepalive) for %s: declared dead, connection closed", e.Remote, e.Silence)
}

// Is makes a *SilentError match ErrSilent.
func (e *SilentError) Is(target error) bool { return target == ErrSilent }
