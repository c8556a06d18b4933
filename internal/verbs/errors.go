package verbs

import "errors"

// Kinds of failure, for errors.Is.
var (
	// ErrNoRDMACore: the host has no rdma-core (libibverbs.so.1) for the
	// helper to load.
	ErrNoRDMACore = errors.New("the host has no rdma-core: libibverbs.so.1 is missing")
	// ErrBuild: the helper could not be built (no compiler, no headers,
	// or the compiler failed).
	ErrBuild = errors.New("cannot build the verbs helper")
	// ErrNoDevice: rdma-core has no device of that name, or no such port.
	ErrNoDevice = errors.New("no such RDMA device")
	// ErrHelperGone: the helper exited or closed its socket.
	ErrHelperGone = errors.New("the verbs helper is gone")
	// ErrProtocol: the helper sent what the protocol does not allow.
	ErrProtocol = errors.New("the verbs helper broke its protocol")
	// ErrTimeout: the helper did not answer in time.
	ErrTimeout = errors.New("the verbs helper did not answer")
	// ErrDevice: rdma-core failed a request (Errno says how).
	ErrDevice = errors.New("the RDMA device refused")
	// ErrUnsupported: the device is of a kind a verbs uplink cannot use.
	ErrUnsupported = errors.New("the RDMA device cannot be a verbs uplink")
)

// Error is a failure of the helper or of the device behind it.
type Error struct {
	Kind  error  // one of the Err values
	Errno int32  // the helper's status, for ErrDevice and ErrNoDevice
	Msg   string // what went wrong, and the fix where there is one
}

func (e *Error) Error() string { return e.Kind.Error() + ": " + e.Msg }

// Is makes errors.Is(err, e.Kind) hold.
func (e *Error) Is(target error) bool { return target == e.Kind }
