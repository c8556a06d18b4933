package qpstate

import "strings"

// Mask selects the attributes a modify carries (enum ibv_qp_attr_mask).
type Mask uint32

const (
	MaskState           Mask = 1 << 0
	MaskCurState        Mask = 1 << 1
	MaskEnSQDAsync      Mask = 1 << 2
	MaskAccessFlags     Mask = 1 << 3
	MaskPKeyIndex       Mask = 1 << 4
	MaskPort            Mask = 1 << 5
	MaskQKey            Mask = 1 << 6
	MaskAV              Mask = 1 << 7
	MaskPathMTU         Mask = 1 << 8
	MaskTimeout         Mask = 1 << 9
	MaskRetryCnt        Mask = 1 << 10
	MaskRNRRetry        Mask = 1 << 11
	MaskRQPSN           Mask = 1 << 12
	MaskMaxQPRdAtomic   Mask = 1 << 13
	MaskAltPath         Mask = 1 << 14
	MaskMinRNRTimer     Mask = 1 << 15
	MaskSQPSN           Mask = 1 << 16
	MaskMaxDestRdAtomic Mask = 1 << 17
	MaskPathMigState    Mask = 1 << 18
	MaskCap             Mask = 1 << 19
	MaskDestQPN         Mask = 1 << 20
)

var maskNames = [...]string{
	"STATE", "CUR_STATE", "EN_SQD_ASYNC_NOTIFY", "ACCESS_FLAGS", "PKEY_INDEX", "PORT", "QKEY", "AV",
	"PATH_MTU", "TIMEOUT", "RETRY_CNT", "RNR_RETRY", "RQ_PSN", "MAX_QP_RD_ATOMIC", "ALT_PATH",
	"MIN_RNR_TIMER", "SQ_PSN", "MAX_DEST_RD_ATOMIC", "PATH_MIG_STATE", "CAP", "DEST_QPN",
}

// String lists the set bits by their ibverbs names, joined by '|'.
func (m Mask) String() string {
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
