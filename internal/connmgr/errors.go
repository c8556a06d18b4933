package connmgr

import (
	"errors"
	"fmt"
	"time"
)

// Errors of the connection manager's admission; match them with
// errors.Is.
var (
	// ErrUnauthorized: Config.Authorize refused a connection, or the peer
	// was not the identity expected at the endpoint.
	ErrUnauthorized = errors.New("connmgr: peer not authorized")
	// ErrIdle: an inbound connection carried nothing for
	// Limits.IdleTimeout.
	ErrIdle = errors.New("connmgr: connection idle")
	// ErrEvicted: an inbound connection was closed to make room.
	ErrEvicted = errors.New("connmgr: connection closed to make room")
)

// AuthError says why a CM connection was refused after its handshake.
type AuthError struct {
	Remote   string
	Outgoing bool
	Want     string // outgoing: the identity expected at the endpoint, if that was the reason
	Got      string
	Err      error // Config.Authorize's, if it refused
}

// Error is short: it ends up in a CM event's text (at most 128 bytes,
// after the peer's address), so it leads with the reason. It names the
// daemon's Config fields, which set Config.Resolve and Authorize.
func (e *AuthError) Error() string {
	switch {
	case e.Err != nil:
		return fmt.Sprintf("refused: %v", e.Err)
	case e.Want != "":
		return fmt.Sprintf("it answered as %q, not %q: refused (a host record pointing at another daemon?)", e.Got, e.Want)
	case e.Outgoing:
		return "refused: CMResolvePeer named no identity for it (it must, with CMAuthorize)"
	}
	return "refused: CMAuthorize named no identity for it"
}

// Is makes an *AuthError match ErrUnauthorized.
func (e *AuthError) Is(target error) bool { return target == ErrUnauthorized }

// Unwrap returns Config.Authorize's error.
func (e *AuthError) Unwrap() error { return e.Err }

// idleError closes an inbound connection that carried nothing.
type idleError struct{ idle time.Duration }

func (e *idleError) Error() string {
	return fmt.Sprintf("no CM connection and no message for %v: closed (the peer opens another when it needs one)", e.idle)
}

func (e *idleError) Is(target error) bool { return target == ErrIdle }

// evictedError closes the idlest inbound connection for a new one.
type evictedError struct{ why string }

func (e *evictedError) Error() string {
	return fmt.Sprintf("closed to make room for a new connection: %s, and this one was the idlest", e.why)
}

func (e *evictedError) Is(target error) bool { return target == ErrEvicted }
