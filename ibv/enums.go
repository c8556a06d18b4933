package ibv

import "fmt"

// Opcode is a send work request opcode (enum ibv_wr_opcode).
type Opcode uint8

const (
	WRRDMAWrite         Opcode = 0
	WRRDMAWriteImm      Opcode = 1
	WRSend              Opcode = 2
	WRSendImm           Opcode = 3
	WRRDMARead          Opcode = 4
	WRAtomicCmpAndSwp   Opcode = 5
	WRAtomicFetchAndAdd Opcode = 6
	// WRLocalInv invalidates the memory window whose rkey is in Imm.
	WRLocalInv Opcode = 7
	// WRBindMW binds a memory window: see BindMW.
	WRBindMW Opcode = 8
	// WRSendInv is a SEND that invalidates the responder's memory window
	// whose rkey is in Imm.
	WRSendInv Opcode = 9
	// WRAtomicWrite writes 8 bytes at RemoteAddr as one store (IBTA 1.5's
	// RDMA ATOMIC WRITE, IBV_WR_ATOMIC_WRITE); the bytes are CompareAdd's,
	// little-endian, and no local memory is read.
	WRAtomicWrite Opcode = 15
)

var opcodeNames = [...]string{"RDMA_WRITE", "RDMA_WRITE_WITH_IMM", "SEND", "SEND_WITH_IMM", "RDMA_READ", "ATOMIC_CMP_AND_SWP", "ATOMIC_FETCH_AND_ADD",
	"LOCAL_INV", "BIND_MW", "SEND_WITH_INV", 15: "ATOMIC_WRITE"}

func (o Opcode) String() string {
	if int(o) < len(opcodeNames) && opcodeNames[o] != "" {
		return opcodeNames[o]
	}
	return fmt.Sprintf("Opcode(%d)", uint8(o))
}

// Valid reports whether o is an opcode this library knows.
func (o Opcode) Valid() bool { return o <= WRAtomicFetchAndAdd }

// IsMW reports whether o is a memory-window operation the requester runs
// by itself (bind, local invalidate): nothing goes to the responder.
func (o Opcode) IsMW() bool { return o == WRLocalInv || o == WRBindMW }

// IsAtomic reports whether o is an atomic operation.
func (o Opcode) IsAtomic() bool { return o == WRAtomicCmpAndSwp || o == WRAtomicFetchAndAdd }

// AllowedOn reports whether opcode o may be posted on a QP of type t
// (IBTA: UC has no READ or atomics; UD has only SEND).
func (o Opcode) AllowedOn(t QPType) bool {
	switch t {
	case RC:
		return o.Valid() || o.IsMW() || o == WRSendInv || o == WRAtomicWrite
	case XRCSend: // RC's operations but IBTA 1.5's ATOMIC WRITE (no XRC opcode here)
		return o.Valid() || o.IsMW() || o == WRSendInv
	case UC:
		return o == WRSend || o == WRSendImm || o == WRRDMAWrite || o == WRRDMAWriteImm || o.IsMW() || o == WRSendInv
	case UD:
		return o == WRSend || o == WRSendImm
	}
	return false
}

// WCOpcode is the opcode of a work completion (enum ibv_wc_opcode).
type WCOpcode uint8

const (
	WCSend      WCOpcode = 0
	WCRDMAWrite WCOpcode = 1
	WCRDMARead  WCOpcode = 2
	WCCompSwap  WCOpcode = 3
	WCFetchAdd  WCOpcode = 4
	WCBindMW    WCOpcode = 5
	WCLocalInv  WCOpcode = 6
	// WCAtomicWrite is IBV_WC_ATOMIC_WRITE.
	WCAtomicWrite WCOpcode = 9
	WCRecv        WCOpcode = 128
	WCRecvRDMAImm WCOpcode = 129
)

func (o WCOpcode) String() string {
	switch o {
	case WCSend:
		return "SEND"
	case WCRDMAWrite:
		return "RDMA_WRITE"
	case WCRDMARead:
		return "RDMA_READ"
	case WCCompSwap:
		return "COMP_SWAP"
	case WCFetchAdd:
		return "FETCH_ADD"
	case WCBindMW:
		return "BIND_MW"
	case WCLocalInv:
		return "LOCAL_INV"
	case WCAtomicWrite:
		return "ATOMIC_WRITE"
	case WCRecv:
		return "RECV"
	case WCRecvRDMAImm:
		return "RECV_RDMA_WITH_IMM"
	}
	return fmt.Sprintf("WCOpcode(%d)", uint8(o))
}

// CompletionOpcode is the WCOpcode of the send completion of op.
func (o Opcode) CompletionOpcode() WCOpcode {
	switch o {
	case WRRDMAWrite, WRRDMAWriteImm:
		return WCRDMAWrite
	case WRRDMARead:
		return WCRDMARead
	case WRAtomicCmpAndSwp:
		return WCCompSwap
	case WRAtomicFetchAndAdd:
		return WCFetchAdd
	case WRBindMW:
		return WCBindMW
	case WRLocalInv:
		return WCLocalInv
	case WRAtomicWrite:
		return WCAtomicWrite
	}
	return WCSend
}

// Status is a work completion status (enum ibv_wc_status).
type Status uint8

const (
	WCSuccess        Status = 0
	WCLocLenErr      Status = 1
	WCLocQPOpErr     Status = 2
	WCLocEECOpErr    Status = 3
	WCLocProtErr     Status = 4
	WCWRFlushErr     Status = 5
	WCMWBindErr      Status = 6
	WCBadRespErr     Status = 7
	WCLocAccessErr   Status = 8
	WCRemInvReqErr   Status = 9
	WCRemAccessErr   Status = 10
	WCRemOpErr       Status = 11
	WCRetryExcErr    Status = 12
	WCRNRRetryExcErr Status = 13
	WCLocRDDViolErr  Status = 14
	WCRemInvRdReqErr Status = 15
	WCRemAbortErr    Status = 16
	WCInvEECNErr     Status = 17
	WCInvEECStateErr Status = 18
	WCFatalErr       Status = 19
	WCRespTimeoutErr Status = 20
	WCGeneralErr     Status = 21
)

var statusNames = [...]string{
	"SUCCESS", "LOC_LEN_ERR", "LOC_QP_OP_ERR", "LOC_EEC_OP_ERR", "LOC_PROT_ERR", "WR_FLUSH_ERR",
	"MW_BIND_ERR", "BAD_RESP_ERR", "LOC_ACCESS_ERR", "REM_INV_REQ_ERR", "REM_ACCESS_ERR",
	"REM_OP_ERR", "RETRY_EXC_ERR", "RNR_RETRY_EXC_ERR", "LOC_RDD_VIOL_ERR", "REM_INV_RD_REQ_ERR",
	"REM_ABORT_ERR", "INV_EECN_ERR", "INV_EEC_STATE_ERR", "FATAL_ERR", "RESP_TIMEOUT_ERR", "GENERAL_ERR",
}

// String returns the ibverbs name without its IBV_WC_ prefix.
func (s Status) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return fmt.Sprintf("Status(%d)", uint8(s))
}

// Access is a set of memory region / QP access flags (enum ibv_access_flags).
type Access uint32

const (
	AccessLocalWrite   Access = 1
	AccessRemoteWrite  Access = 2
	AccessRemoteRead   Access = 4
	AccessRemoteAtomic Access = 8
	// AccessMWBind lets memory windows be bound to a region
	// (IBV_ACCESS_MW_BIND).
	AccessMWBind Access = 16
	// AccessOnDemand asks for an on-demand-paging region
	// (IBV_ACCESS_ON_DEMAND): its pages are not locked in RAM nor charged
	// to the locked-memory limits (docs/design/odp.md). It grants nothing,
	// so it is not in AccessAll; on a QP's access flags it means nothing.
	AccessOnDemand Access = 64

	AccessAll = AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead | AccessRemoteAtomic | AccessMWBind
)

func (a Access) String() string {
	if a == 0 {
		return "none"
	}
	s := ""
	add := func(bit Access, name string) {
		if a&bit != 0 {
			if s != "" {
				s += "|"
			}
			s += name
		}
	}
	add(AccessLocalWrite, "LOCAL_WRITE")
	add(AccessRemoteWrite, "REMOTE_WRITE")
	add(AccessRemoteRead, "REMOTE_READ")
	add(AccessRemoteAtomic, "REMOTE_ATOMIC")
	add(AccessMWBind, "MW_BIND")
	add(AccessOnDemand, "ON_DEMAND")
	if rest := a &^ (AccessAll | AccessOnDemand); rest != 0 {
		s += fmt.Sprintf("|0x%x", uint32(rest))
	}
	return s
}

// QPType is a queue pair transport type (enum ibv_qp_type).
type QPType uint8

const (
	RC QPType = 2
	UC QPType = 3
	UD QPType = 4
	// The XRC types (IBV_QPT_XRC_SEND, IBV_QPT_XRC_RECV): an initiator
	// that only sends, each request to the XRC SRQ its work request names,
	// and a target that only receives, into the SRQ a packet names.
	XRCSend QPType = 9
	XRCRecv QPType = 10
)

func (t QPType) String() string {
	switch t {
	case RC:
		return "RC"
	case UC:
		return "UC"
	case UD:
		return "UD"
	case XRCSend:
		return "XRC_SEND"
	case XRCRecv:
		return "XRC_RECV"
	}
	return fmt.Sprintf("QPType(%d)", uint8(t))
}

// Valid reports whether t is a supported QP type other than XRC's.
func (t QPType) Valid() bool { return t == RC || t == UC || t == UD }

// IsXRC reports whether t is an XRC type.
func (t QPType) IsXRC() bool { return t == XRCSend || t == XRCRecv }

// QPState is a queue pair state (enum ibv_qp_state).
type QPState uint8

const (
	QPSReset QPState = 0
	QPSInit  QPState = 1
	QPSRTR   QPState = 2
	QPSRTS   QPState = 3
	QPSSQD   QPState = 4
	QPSSQE   QPState = 5
	QPSErr   QPState = 6
)

var qpStateNames = [...]string{"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"}

func (s QPState) String() string {
	if int(s) < len(qpStateNames) {
		return qpStateNames[s]
	}
	return fmt.Sprintf("QPState(%d)", uint8(s))
}

// SendFlags modify a send work request (enum ibv_send_flags).
type SendFlags uint8

const (
	SendFence     SendFlags = 1
	SendSignaled  SendFlags = 2
	SendSolicited SendFlags = 4
	SendInline    SendFlags = 8
)

// WCFlags describe a work completion (enum ibv_wc_flags).
type WCFlags uint8

const (
	WCWithGRH WCFlags = 1
	WCWithImm WCFlags = 2
	// WCWithInv: a SEND_WITH_INV invalidated the rkey the completion's
	// Imm holds (IBV_WC_WITH_INV).
	WCWithInv WCFlags = 8
)

// EventType is an asynchronous event type (enum ibv_event_type).
type EventType uint8

const (
	EventCQErr       EventType = 0
	EventQPFatal     EventType = 1
	EventQPReqErr    EventType = 2
	EventQPAccessErr EventType = 3
	EventCommEst     EventType = 4
	EventSQDrained   EventType = 5
	EventDeviceFatal EventType = 8
	EventPortActive  EventType = 9
	EventPortErr     EventType = 10
	EventSRQErr      EventType = 14
	EventSRQLimit    EventType = 15
	EventQPLastWQE   EventType = 16
	EventGIDChange   EventType = 18
)

func (e EventType) String() string {
	switch e {
	case EventCQErr:
		return "CQ_ERR"
	case EventQPFatal:
		return "QP_FATAL"
	case EventQPReqErr:
		return "QP_REQ_ERR"
	case EventQPAccessErr:
		return "QP_ACCESS_ERR"
	case EventCommEst:
		return "COMM_EST"
	case EventSQDrained:
		return "SQ_DRAINED"
	case EventDeviceFatal:
		return "DEVICE_FATAL"
	case EventPortActive:
		return "PORT_ACTIVE"
	case EventPortErr:
		return "PORT_ERR"
	case EventSRQErr:
		return "SRQ_ERR"
	case EventSRQLimit:
		return "SRQ_LIMIT_REACHED"
	case EventQPLastWQE:
		return "QP_LAST_WQE_REACHED"
	case EventGIDChange:
		return "GID_CHANGE"
	}
	return fmt.Sprintf("EventType(%d)", uint8(e))
}

// MTU is an IB MTU enumeration value (enum ibv_mtu): 1 = 256 bytes ... 5 = 4096.
type MTU uint8

const (
	MTU256  MTU = 1
	MTU512  MTU = 2
	MTU1024 MTU = 3
	MTU2048 MTU = 4
	MTU4096 MTU = 5
)

// Bytes returns the MTU in bytes, 0 for an invalid value.
func (m MTU) Bytes() int {
	if m < MTU256 || m > MTU4096 {
		return 0
	}
	return 128 << m
}

// Valid reports whether m is one of the five IB MTUs.
func (m MTU) Valid() bool { return m >= MTU256 && m <= MTU4096 }

func (m MTU) String() string {
	if !m.Valid() {
		return fmt.Sprintf("MTU(%d)", uint8(m))
	}
	return fmt.Sprint(m.Bytes())
}

// MTUFromBytes returns the largest IB MTU not above n bytes, 0 if n < 256.
func MTUFromBytes(n int) MTU {
	for m := MTU4096; m >= MTU256; m-- {
		if m.Bytes() <= n {
			return m
		}
	}
	return 0
}

// RNRTimer returns the duration, in nanoseconds, that min_rnr_timer value v
// (0..31) stands for (IBTA table 45; 0 means 655.36 ms).
func RNRTimer(v uint8) int64 {
	if int(v) >= len(rnrTimerNS) {
		return 0
	}
	return rnrTimerNS[v]
}

var rnrTimerNS = [32]int64{
	655_360_000, 10_000, 20_000, 30_000, 40_000, 60_000, 80_000, 120_000,
	160_000, 240_000, 320_000, 480_000, 640_000, 960_000, 1_280_000, 1_920_000,
	2_560_000, 3_840_000, 5_120_000, 7_680_000, 10_240_000, 15_360_000, 20_480_000, 30_720_000,
	40_960_000, 61_440_000, 81_920_000, 122_880_000, 163_840_000, 245_760_000, 327_680_000, 491_520_000,
}

// AckTimeout returns the local ACK timeout for QP attribute timeout (0..31):
// 4.096 µs × 2^timeout in nanoseconds; 0 means infinite and returns 0.
func AckTimeout(timeout uint8) int64 {
	if timeout == 0 || timeout > 31 {
		return 0
	}
	return 4096 << timeout
}
