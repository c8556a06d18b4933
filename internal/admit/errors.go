package admit

import (
	"errors"
	"fmt"
	"net/netip"
)

// Errors of admission; match them with errors.Is. The typed errors below
// carry the details and match these.
var (
	// ErrSourceFull: a source had its handshakes' worth in flight.
	ErrSourceFull = errors.New("admit: too many handshakes from one source")
	// ErrCut: a handshake was cut to make room for a newer one.
	ErrCut = errors.New("admit: handshake cut to make room")
)

// SourceFullError says a source already had Limit handshakes in flight.
type SourceFullError struct {
	Source netip.Addr
	Limit  int
}

func (e *SourceFullError) Error() string {
	return fmt.Sprintf("admit: %v has %d connections in their handshake already, the most one source may: refused another (a daemon needs one; something is opening connections and not finishing them)",
		e.Source, e.Limit)
}

// Is makes a *SourceFullError match ErrSourceFull.
func (e *SourceFullError) Is(target error) bool { return target == ErrSourceFull }

// CutError says a handshake was cut because Limit handshakes were in
// flight and it was the oldest.
type CutError struct {
	Source netip.Addr
	Limit  int
}

func (e *CutError) Error() string {
	return fmt.Sprintf("admit: the handshake of %v was cut: %d connections were in their handshake, the most in all, and it was the oldest (a daemon finishes its handshake in milliseconds; idle connections are what gets cut)",
		e.Source, e.Limit)
}

// Is makes a *CutError match ErrCut.
func (e *CutError) Is(target error) bool { return target == ErrCut }
