package vrdma

import (
	"errors"
	"fmt"

	"github.com/vrdma/vrdma/ibv"
	"github.com/vrdma/vrdma/internal/proto"
	"github.com/vrdma/vrdma/internal/qpstate"
	"github.com/vrdma/vrdma/internal/shm"
)

// Sentinel errors; every error of this package matches one of them with
// errors.Is.
var (
	ErrInvalidArgument = errors.New("invalid argument")
	ErrNotFound        = errors.New("not found")
	ErrBusy            = errors.New("resource in use")
	ErrLimit           = errors.New("limit reached")
	ErrInvalidState    = qpstate.ErrInvalidTransition
	ErrInvalidAttr     = qpstate.ErrInvalidAttr
	ErrMemlock         = errors.New("cannot lock memory")
	ErrPermission      = errors.New("permission denied")
	ErrVersion         = errors.New("library and daemon versions differ")
	ErrNoDaemon        = errors.New("no vrdma daemon")
	ErrDeviceFatal     = errors.New("device lost: the vrdma daemon went away")
	ErrClosed          = errors.New("object closed")
	ErrQueueFull       = errors.New("work queue full")
	ErrCQOverrun       = errors.New("completion queue overrun")
)

// MemlockError reports memory that could not be locked in RAM; its message
// says how much was asked, the limit, and how to raise it.
type MemlockError = shm.MemlockError

// Error is a failed verb: which one, the class of failure and the reason.
type Error struct {
	Op   string // the verb: "reg_mr", "modify_qp", ...
	Kind error  // one of the sentinel errors
	Msg  string // what went wrong and how to fix it
	Err  error  // the underlying error, if any
}

func (e *Error) Error() string {
	if e.Msg != "" {
		return fmt.Sprintf("vrdma: %s: %s", e.Op, e.Msg)
	}
	return fmt.Sprintf("vrdma: %s: %v", e.Op, e.Err)
}

// Unwrap exposes both the class and the cause to errors.Is and errors.As.
func (e *Error) Unwrap() []error {
	out := make([]error, 0, 2)
	if e.Kind != nil {
		out = append(out, e.Kind)
	}
	if e.Err != nil {
		out = append(out, e.Err)
	}
	return out
}

func errorf(op string, kind error, format string, args ...any) *Error {
	return &Error{Op: op, Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

// fromProto turns a daemon's error reply into an *Error of the right class.
func fromProto(op string, pe *proto.Error) *Error {
	kind := map[proto.Code]error{
		proto.CodeInvalid: ErrInvalidArgument, proto.CodeNotFound: ErrNotFound, proto.CodeLimit: ErrLimit,
		proto.CodeBusy: ErrBusy, proto.CodeState: ErrInvalidState, proto.CodeMemlock: ErrMemlock,
		proto.CodePermission: ErrPermission, proto.CodeVersion: ErrVersion, proto.CodeAttr: ErrInvalidAttr,
	}[pe.Code]
	return &Error{Op: op, Kind: kind, Msg: pe.Message}
}

// WCError is a work completion that did not succeed.
type WCError struct {
	ID     uint64
	Status ibv.Status
	Opcode ibv.WCOpcode
	QPNum  uint32
}

func (e *WCError) Error() string {
	return fmt.Sprintf("vrdma: work request %d (%v on QP 0x%x) completed with %v: %s", e.ID, e.Opcode, e.QPNum, e.Status, statusHelp(e.Status))
}

func statusHelp(s ibv.Status) string {
	switch s {
	case ibv.WCLocLenErr:
		return "a length was wrong: a receive buffer too small, inline data too long, or a message above the MTU (UD)"
	case ibv.WCLocQPOpErr:
		return "the work request was malformed or not allowed on this QP type"
	case ibv.WCLocProtErr:
		return "a local key, range or access flag did not match a registered region of this QP's protection domain"
	case ibv.WCWRFlushErr:
		return "the QP was in the error state; the request was not executed"
	case ibv.WCRemInvReqErr:
		return "the responder found the request invalid (receive buffer too small, operation not enabled by its QP access flags, misaligned atomic); " +
			"a QP connected with the zero ConnectOptions allows no RDMA WRITE, READ or atomic: pass nil (DefaultConnectOptions) or set ConnectOptions.Access"
	case ibv.WCRemAccessErr:
		return "the rkey, the remote range or its access flags do not allow this operation"
	case ibv.WCRemOpErr:
		return "the responder failed to execute the request (bad receive request)"
	case ibv.WCRetryExcErr:
		return "the peer did not answer within timeout × retry_cnt: is the remote QP connected and in RTR or RTS?"
	case ibv.WCRNRRetryExcErr:
		return "the responder had no receive posted within rnr_retry tries: post receives first or raise rnr_retry (7 = infinite)"
	}
	return "see the ibverbs documentation of this status"
}
