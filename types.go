package vrdma

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/qpstate"
)

// Opcode is a send work request opcode (enum ibv_wr_opcode).
type Opcode = abi.Opcode

const (
	WRRDMAWrite         = abi.OpRDMAWrite
	WRRDMAWriteImm      = abi.OpRDMAWriteImm
	WRSend              = abi.OpSend
	WRSendImm           = abi.OpSendImm
	WRRDMARead          = abi.OpRDMARead
	WRAtomicCmpAndSwp   = abi.OpAtomicCmpAndSwp
	WRAtomicFetchAndAdd = abi.OpAtomicFetchAndAdd
	// WRAtomicWrite stores CompareAdd's 8 bytes (little-endian) at
	// RemoteAddr as one store; it reads no local memory (no SGL).
	WRAtomicWrite = abi.OpAtomicWrite
)

// WCOpcode is the opcode of a work completion (enum ibv_wc_opcode).
type WCOpcode = abi.WCOpcode

const (
	WCSend        = abi.WCSend
	WCRDMAWrite   = abi.WCRDMAWrite
	WCRDMARead    = abi.WCRDMARead
	WCCompSwap    = abi.WCCompSwap
	WCFetchAdd    = abi.WCFetchAdd
	WCAtomicWrite = abi.WCAtomicWrite
	WCRecv        = abi.WCRecv
	WCRecvRDMAImm = abi.WCRecvRDMAImm
)

// Status is a work completion status (enum ibv_wc_status).
type Status = abi.Status

const (
	WCSuccess        = abi.StatusSuccess
	WCLocLenErr      = abi.StatusLocLenErr
	WCLocQPOpErr     = abi.StatusLocQPOpErr
	WCLocProtErr     = abi.StatusLocProtErr
	WCWRFlushErr     = abi.StatusWRFlushErr
	WCLocAccessErr   = abi.StatusLocAccessErr
	WCRemInvReqErr   = abi.StatusRemInvReqErr
	WCRemAccessErr   = abi.StatusRemAccessErr
	WCRemOpErr       = abi.StatusRemOpErr
	WCRetryExcErr    = abi.StatusRetryExcErr
	WCRNRRetryExcErr = abi.StatusRNRRetryExcErr
	WCFatalErr       = abi.StatusFatalErr
	WCGeneralErr     = abi.StatusGeneralErr
)

// Access is a set of access flags (enum ibv_access_flags).
type Access = abi.Access

const (
	AccessLocalWrite   = abi.AccessLocalWrite
	AccessRemoteWrite  = abi.AccessRemoteWrite
	AccessRemoteRead   = abi.AccessRemoteRead
	AccessRemoteAtomic = abi.AccessRemoteAtomic
)

// QPType is a queue pair transport (enum ibv_qp_type).
type QPType = abi.QPType

const (
	RC = abi.QPTypeRC
	UC = abi.QPTypeUC
	UD = abi.QPTypeUD
)

// QPState is a queue pair state (enum ibv_qp_state).
type QPState = abi.QPState

const (
	QPSReset = abi.QPStateReset
	QPSInit  = abi.QPStateInit
	QPSRTR   = abi.QPStateRTR
	QPSRTS   = abi.QPStateRTS
	QPSSQD   = abi.QPStateSQD
	QPSSQE   = abi.QPStateSQE
	QPSErr   = abi.QPStateErr
)

// SendFlags modify a send work request (enum ibv_send_flags).
type SendFlags = abi.SendFlags

const (
	SendFence     = abi.SendFence
	SendSignaled  = abi.SendSignaled
	SendSolicited = abi.SendSolicited
	SendInline    = abi.SendInline
)

// WCFlags describe a work completion (enum ibv_wc_flags).
type WCFlags = abi.WCFlags

const (
	WCWithGRH = abi.WCWithGRH
	WCWithImm = abi.WCWithImm
)

// EventType is an asynchronous event type (enum ibv_event_type).
type EventType = abi.EventType

const (
	EventCQErr       = abi.EventCQErr
	EventQPFatal     = abi.EventQPFatal
	EventQPReqErr    = abi.EventQPReqErr
	EventQPAccessErr = abi.EventQPAccessErr
	EventDeviceFatal = abi.EventDeviceFatal
	EventPortActive  = abi.EventPortActive
	EventPortErr     = abi.EventPortErr
	EventSRQErr      = abi.EventSRQErr
)

// MTU is an IB MTU enumeration value (enum ibv_mtu).
type MTU = abi.MTU

const (
	MTU256  = abi.MTU256
	MTU512  = abi.MTU512
	MTU1024 = abi.MTU1024
	MTU2048 = abi.MTU2048
	MTU4096 = abi.MTU4096
)

// QPAttr holds queue pair attributes (struct ibv_qp_attr).
type QPAttr = qpstate.Attr

// AHAttr is an address vector (struct ibv_ah_attr with its GRH).
type AHAttr = qpstate.AddressVector

// QPAttrMask selects attributes in QP.Modify (enum ibv_qp_attr_mask).
type QPAttrMask = qpstate.Mask

const (
	AttrState           = qpstate.MaskState
	AttrCurState        = qpstate.MaskCurState
	AttrAccessFlags     = qpstate.MaskAccessFlags
	AttrPKeyIndex       = qpstate.MaskPKeyIndex
	AttrPort            = qpstate.MaskPort
	AttrQKey            = qpstate.MaskQKey
	AttrAV              = qpstate.MaskAV
	AttrPathMTU         = qpstate.MaskPathMTU
	AttrTimeout         = qpstate.MaskTimeout
	AttrRetryCnt        = qpstate.MaskRetryCnt
	AttrRNRRetry        = qpstate.MaskRNRRetry
	AttrRQPSN           = qpstate.MaskRQPSN
	AttrMaxQPRdAtomic   = qpstate.MaskMaxQPRdAtomic
	AttrMinRNRTimer     = qpstate.MaskMinRNRTimer
	AttrSQPSN           = qpstate.MaskSQPSN
	AttrMaxDestRdAtomic = qpstate.MaskMaxDestRdAtomic
	AttrDestQPN         = qpstate.MaskDestQPN
)

// SGE is a scatter/gather element: Length bytes at address Addr of the
// memory region whose local key is LKey (struct ibv_sge).
type SGE = abi.SGE

// GID is a 128-bit global identifier.
type GID [16]byte

// String formats g as ibv_devinfo does: eight groups of four hex digits.
func (g GID) String() string {
	var b strings.Builder
	for i := 0; i < 16; i += 2 {
		if i > 0 {
			b.WriteByte(':')
		}
		fmt.Fprintf(&b, "%02x%02x", g[i], g[i+1])
	}
	return b.String()
}

// ParseGID accepts the ibv_devinfo form or any IPv6 / IPv4 address
// (IPv4 maps to ::ffff:a.b.c.d, as RoCEv2 GIDs do).
func ParseGID(s string) (GID, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return GID{}, fmt.Errorf("vrdma: GID %q: %w: use a form like fe80:0000:0000:0000:0000:00ff:fe00:0001 or 192.0.2.1", s, ErrInvalidArgument)
	}
	return GID(a.As16()), nil
}
