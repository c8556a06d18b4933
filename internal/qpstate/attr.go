package qpstate

import "github.com/vrdma/vrdma/ibv"

// AddressVector is where an RC/UC QP sends: package ibv's AHAttr.
type AddressVector = ibv.AHAttr

// Attr holds queue pair attributes: package ibv's QPAttr.
type Attr = ibv.QPAttr

// Limits are the device limits attribute values are checked against.
type Limits struct {
	PKeyTableLen int
	GIDTableLen  int
	MaxRdAtomic  int
}

// Apply copies the attributes selected by mask from src into dst.
func Apply(dst *Attr, src *Attr, mask Mask) {
	if mask&MaskState != 0 {
		dst.State = src.State
	}
	if mask&MaskAccessFlags != 0 {
		dst.AccessFlags = src.AccessFlags
	}
	if mask&MaskPKeyIndex != 0 {
		dst.PKeyIndex = src.PKeyIndex
	}
	if mask&MaskPort != 0 {
		dst.PortNum = src.PortNum
	}
	if mask&MaskQKey != 0 {
		dst.QKey = src.QKey
	}
	if mask&MaskAV != 0 {
		dst.AV = src.AV
	}
	if mask&MaskPathMTU != 0 {
		dst.PathMTU = src.PathMTU
	}
	if mask&MaskTimeout != 0 {
		dst.Timeout = src.Timeout
	}
	if mask&MaskRetryCnt != 0 {
		dst.RetryCnt = src.RetryCnt
	}
	if mask&MaskRNRRetry != 0 {
		dst.RNRRetry = src.RNRRetry
	}
	if mask&MaskRQPSN != 0 {
		dst.RQPSN = src.RQPSN
	}
	if mask&MaskSQPSN != 0 {
		dst.SQPSN = src.SQPSN
	}
	if mask&MaskMaxQPRdAtomic != 0 {
		dst.MaxRdAtomic = src.MaxRdAtomic
	}
	if mask&MaskMaxDestRdAtomic != 0 {
		dst.MaxDestRdAtomic = src.MaxDestRdAtomic
	}
	if mask&MaskMinRNRTimer != 0 {
		dst.MinRNRTimer = src.MinRNRTimer
	}
	if mask&MaskDestQPN != 0 {
		dst.DestQPN = src.DestQPN
	}
}
