package fabric

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error this package returns wraps one of these (or
// is a *ValidationError), so callers can test with errors.Is / errors.As.
var (
	// ErrNotFound: the key or record does not exist (or its lease ended).
	ErrNotFound = errors.New("fabric: not found")
	// ErrConflict: a transaction's condition failed because someone else
	// changed the record first; read it again and retry.
	ErrConflict = errors.New("fabric: concurrent change")
	// ErrNoLeader: no subnet manager is elected at the moment.
	ErrNoLeader = errors.New("fabric: no subnet manager elected")
	// ErrNotLeader: this candidate lost (or never held) the subnet-manager
	// role, so its write was refused.
	ErrNotLeader = errors.New("fabric: not the subnet manager")
	// ErrSessionLost: the lease behind a session expired or was revoked;
	// every key put under it is gone. Open a new session and register again.
	ErrSessionLost = errors.New("fabric: session lease expired or revoked")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("fabric: store closed")
	// ErrCompacted: a watch asked for history that etcd already compacted;
	// list again and watch from the list's revision.
	ErrCompacted = errors.New("fabric: watch revision compacted")
	// ErrInUse: the record is still referenced (a port group that adapters
	// are attached to).
	ErrInUse = errors.New("fabric: still in use")
	// ErrInvalid is wrapped by every *ValidationError.
	ErrInvalid = errors.New("fabric: invalid record")
	// ErrInsecure: a plaintext etcd URL on an address other hosts reach,
	// without the operator's explicit consent (Insecure).
	ErrInsecure = errors.New("fabric: unauthenticated etcd beyond this host")
)

// ValidationError says which field of which record is wrong, why, and how
// to fix it. It wraps ErrInvalid.
type ValidationError struct {
	Kind    string // "port group", "host", "instance", "adapter", "uplink", "switch"
	Name    string // the record's name ("" if the name itself is missing)
	Field   string // the offending field, e.g. "VLAN" or "Adapters[3].PortGroup"
	Problem string // what is wrong, e.g. `VLAN 4095 is reserved`
	Fix     string // what to do, e.g. "use a VLAN between 0 (untagged) and 4094"
}

func (e *ValidationError) Error() string {
	name := e.Name
	if name == "" {
		name = "(unnamed)"
	}
	s := fmt.Sprintf("%s %q: %s: %s", e.Kind, name, e.Field, e.Problem)
	if e.Fix != "" {
		s += "; " + e.Fix
	}
	return s
}

// Unwrap makes errors.Is(err, ErrInvalid) true.
func (e *ValidationError) Unwrap() error { return ErrInvalid }

// invalid builds a *ValidationError.
func invalid(kind, name, field, problem, fix string) *ValidationError {
	return &ValidationError{Kind: kind, Name: name, Field: field, Problem: problem, Fix: fix}
}
