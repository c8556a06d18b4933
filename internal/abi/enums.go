package abi

import "github.com/vrdma/vrdma/ibv"

// The ibverbs enumerations are package ibv's, the module's public verbs
// vocabulary; these are their names inside the daemon and the engine.

type (
	Opcode    = ibv.Opcode
	WCOpcode  = ibv.WCOpcode
	Status    = ibv.Status
	Access    = ibv.Access
	QPType    = ibv.QPType
	QPState   = ibv.QPState
	SendFlags = ibv.SendFlags
	WCFlags   = ibv.WCFlags
	EventType = ibv.EventType
	MTU       = ibv.MTU
)

const (
	OpRDMAWrite          = ibv.WRRDMAWrite
	OpRDMAWriteImm       = ibv.WRRDMAWriteImm
	OpSend               = ibv.WRSend
	OpSendImm            = ibv.WRSendImm
	OpRDMARead           = ibv.WRRDMARead
	OpAtomicCmpAndSwp    = ibv.WRAtomicCmpAndSwp
	OpAtomicFetchAndAdd  = ibv.WRAtomicFetchAndAdd
	OpLocalInv           = ibv.WRLocalInv
	OpBindMW             = ibv.WRBindMW
	OpSendInv            = ibv.WRSendInv
	OpAtomicWrite        = ibv.WRAtomicWrite
	WCSend               = ibv.WCSend
	WCRDMAWrite          = ibv.WCRDMAWrite
	WCRDMARead           = ibv.WCRDMARead
	WCCompSwap           = ibv.WCCompSwap
	WCFetchAdd           = ibv.WCFetchAdd
	WCBindMW             = ibv.WCBindMW
	WCLocalInv           = ibv.WCLocalInv
	WCAtomicWrite        = ibv.WCAtomicWrite
	WCRecv               = ibv.WCRecv
	WCRecvRDMAImm        = ibv.WCRecvRDMAImm
	StatusSuccess        = ibv.WCSuccess
	StatusLocLenErr      = ibv.WCLocLenErr
	StatusLocQPOpErr     = ibv.WCLocQPOpErr
	StatusLocEECOpErr    = ibv.WCLocEECOpErr
	StatusLocProtErr     = ibv.WCLocProtErr
	StatusWRFlushErr     = ibv.WCWRFlushErr
	StatusMWBindErr      = ibv.WCMWBindErr
	StatusBadRespErr     = ibv.WCBadRespErr
	StatusLocAccessErr   = ibv.WCLocAccessErr
	StatusRemInvReqErr   = ibv.WCRemInvReqErr
	StatusRemAccessErr   = ibv.WCRemAccessErr
	StatusRemOpErr       = ibv.WCRemOpErr
	StatusRetryExcErr    = ibv.WCRetryExcErr
	StatusRNRRetryExcErr = ibv.WCRNRRetryExcErr
	StatusLocRDDViolErr  = ibv.WCLocRDDViolErr
	StatusRemInvRdReqErr = ibv.WCRemInvRdReqErr
	StatusRemAbortErr    = ibv.WCRemAbortErr
	StatusInvEECNErr     = ibv.WCInvEECNErr
	StatusInvEECStateErr = ibv.WCInvEECStateErr
	StatusFatalErr       = ibv.WCFatalErr
	StatusRespTimeoutErr = ibv.WCRespTimeoutErr
	StatusGeneralErr     = ibv.WCGeneralErr
	AccessLocalWrite     = ibv.AccessLocalWrite
	AccessRemoteWrite    = ibv.AccessRemoteWrite
	AccessRemoteRead     = ibv.AccessRemoteRead
	AccessRemoteAtomic   = ibv.AccessRemoteAtomic
	AccessMWBind         = ibv.AccessMWBind
	AccessOnDemand       = ibv.AccessOnDemand
	AccessAll            = ibv.AccessAll
	QPTypeRC             = ibv.RC
	QPTypeUC             = ibv.UC
	QPTypeUD             = ibv.UD
	QPTypeXRCSend        = ibv.XRCSend
	QPTypeXRCRecv        = ibv.XRCRecv
	QPStateReset         = ibv.QPSReset
	QPStateInit          = ibv.QPSInit
	QPStateRTR           = ibv.QPSRTR
	QPStateRTS           = ibv.QPSRTS
	QPStateSQD           = ibv.QPSSQD
	QPStateSQE           = ibv.QPSSQE
	QPStateErr           = ibv.QPSErr
	SendFence            = ibv.SendFence
	SendSignaled         = ibv.SendSignaled
	SendSolicited        = ibv.SendSolicited
	SendInline           = ibv.SendInline
	WCWithGRH            = ibv.WCWithGRH
	WCWithImm            = ibv.WCWithImm
	WCWithInv            = ibv.WCWithInv
	EventCQErr           = ibv.EventCQErr
	EventQPFatal         = ibv.EventQPFatal
	EventQPReqErr        = ibv.EventQPReqErr
	EventQPAccessErr     = ibv.EventQPAccessErr
	EventCommEst         = ibv.EventCommEst
	EventSQDrained       = ibv.EventSQDrained
	EventDeviceFatal     = ibv.EventDeviceFatal
	EventPortActive      = ibv.EventPortActive
	EventPortErr         = ibv.EventPortErr
	EventSRQErr          = ibv.EventSRQErr
	EventSRQLimit        = ibv.EventSRQLimit
	EventQPLastWQE       = ibv.EventQPLastWQE
	EventGIDChange       = ibv.EventGIDChange
	MTU256               = ibv.MTU256
	MTU512               = ibv.MTU512
	MTU1024              = ibv.MTU1024
	MTU2048              = ibv.MTU2048
	MTU4096              = ibv.MTU4096
)

// MTUFromBytes returns the largest IB MTU not above n bytes, 0 if n < 256.
func MTUFromBytes(n int) MTU { return ibv.MTUFromBytes(n) }

// RNRTimer returns the duration, in nanoseconds, that min_rnr_timer value v
// (0..31) stands for (IBTA table 45; 0 means 655.36 ms).
func RNRTimer(v uint8) int64 { return ibv.RNRTimer(v) }

// AckTimeout returns the local ACK timeout for QP attribute timeout (0..31):
// 4.096 µs × 2^timeout in nanoseconds; 0 means infinite and returns 0.
func AckTimeout(timeout uint8) int64 { return ibv.AckTimeout(timeout) }
