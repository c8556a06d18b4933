package ibv

import "strings"

// AHAttr is where an RC/UC QP sends (ibv_ah_attr with its GRH).
//
// DLID is the destination port's LID, for an address vector without a GRH
// (is_global 0): a vrdma extension. rdma_rxe refuses such address vectors
// on its RoCE ports; vrdma takes them because its switch knows every port,
// as an InfiniBand subnet manager does, and resolves the LID to the port's
// GID (docs/design/lid-addressing.md). A non-zero DGID wins over DLID.
type AHAttr struct {
	DGID         [16]byte
	DLID         uint16
	SGIDIndex    uint8
	HopLimit     uint8
	TrafficClass uint8
	FlowLabel    uint32
	SL           uint8
	PortNum      uint8
}

// QPAttr holds queue pair attributes (struct ibv_qp_attr, the parts that apply).
type QPAttr struct {
	State           QPState
	CurState        QPState
	AccessFlags     Access
	PKeyIndex       uint16
	PortNum         uint8
	QKey            uint32
	AV              AHAttr
	PathMTU         MTU
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

// QPAttrMask selects the attributes a modify carries (enum ibv_qp_attr_mask).
type QPAttrMask uint32

const (
	AttrState           QPAttrMask = 1 << 0
	AttrCurState        QPAttrMask = 1 << 1
	AttrEnSQDAsync      QPAttrMask = 1 << 2
	AttrAccessFlags     QPAttrMask = 1 << 3
	AttrPKeyIndex       QPAttrMask = 1 << 4
	AttrPort            QPAttrMask = 1 << 5
	AttrQKey            QPAttrMask = 1 << 6
	AttrAV              QPAttrMask = 1 << 7
	AttrPathMTU         QPAttrMask = 1 << 8
	AttrTimeout         QPAttrMask = 1 << 9
	AttrRetryCnt        QPAttrMask = 1 << 10
	AttrRNRRetry        QPAttrMask = 1 << 11
	AttrRQPSN           QPAttrMask = 1 << 12
	AttrMaxQPRdAtomic   QPAttrMask = 1 << 13
	AttrAltPath         QPAttrMask = 1 << 14
	AttrMinRNRTimer     QPAttrMask = 1 << 15
	AttrSQPSN           QPAttrMask = 1 << 16
	AttrMaxDestRdAtomic QPAttrMask = 1 << 17
	AttrPathMigState    QPAttrMask = 1 << 18
	AttrCap             QPAttrMask = 1 << 19
	AttrDestQPN         QPAttrMask = 1 << 20
)

var maskNames = [...]string{
	"STATE", "CUR_STATE", "EN_SQD_ASYNC_NOTIFY", "ACCESS_FLAGS", "PKEY_INDEX", "PORT", "QKEY", "AV",
	"PATH_MTU", "TIMEOUT", "RETRY_CNT", "RNR_RETRY", "RQ_PSN", "MAX_QP_RD_ATOMIC", "ALT_PATH",
	"MIN_RNR_TIMER", "SQ_PSN", "MAX_DEST_RD_ATOMIC", "PATH_MIG_STATE", "CAP", "DEST_QPN",
}

// String lists the set bits by their ibverbs names, joined by '|'.
func (m QPAttrMask) String() string {
	var parts []string
	for i, n := range maskNames {
		if m&(1<<i) != 0 {
			parts = append(parts, n)
		}
	}
	if rest := m &^ (1<<len(maskNames) - 1); rest != 0 {
		parts = append(parts, "unknown")
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "|")
}
