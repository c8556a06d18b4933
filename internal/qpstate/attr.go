package qpstate

import "github.com/vrdma/vrdma/internal/abi"

// AddressVector is where an RC/UC QP sends (ibv_ah_attr with its GRH).
//
// DLID is the destination port's LID, for an address vector without a GRH
// (is_global 0): a vrdma extension. rdma_rxe refuses such address vectors
// on its RoCE ports; vrdma takes them because its switch knows every port,
// as an InfiniBand subnet manager does, and resolves the LID to the port's
// GID (docs/design/lid-addressing.md). A non-zero DGID wins over DLID.
type AddressVector struct {
	DGID         [16]byte
	DLID         uint16
	SGIDIndex    uint8
	HopLimit     uint8
	TrafficClass uint8
	FlowLabel    uint32
	SL           uint8
	PortNum      uint8
}

// Attr holds queue pair attributes (struct ibv_qp_attr, the parts that apply).
type Attr struct {
	State           abi.QPState
	CurState        abi.QPState
	AccessFlags     abi.Access
	PKeyIndex       uint16
	PortNum         uint8
	QKey            uint32
	AV              AddressVector
	PathMTU         abi.MTU
	Timeout         uint8
	RetryCnt        uint8
	RNRRetry        uint8
	RQPSN           uint32
	SQPSN           uint32
	MaxRdAtomic     uint8
	MaxDestRdAtomic uint8
	MinRNRTimer     uint8
	DestQPN         uint32
}

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
