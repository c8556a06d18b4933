package qpstate

import "github.com/vrdma/vrdma/ibv"

// Mask selects the attributes a modify carries: package ibv's QPAttrMask.
type Mask = ibv.QPAttrMask

const (
	MaskState           = ibv.AttrState
	MaskCurState        = ibv.AttrCurState
	MaskEnSQDAsync      = ibv.AttrEnSQDAsync
	MaskAccessFlags     = ibv.AttrAccessFlags
	MaskPKeyIndex       = ibv.AttrPKeyIndex
	MaskPort            = ibv.AttrPort
	MaskQKey            = ibv.AttrQKey
	MaskAV              = ibv.AttrAV
	MaskPathMTU         = ibv.AttrPathMTU
	MaskTimeout         = ibv.AttrTimeout
	MaskRetryCnt        = ibv.AttrRetryCnt
	MaskRNRRetry        = ibv.AttrRNRRetry
	MaskRQPSN           = ibv.AttrRQPSN
	MaskMaxQPRdAtomic   = ibv.AttrMaxQPRdAtomic
	MaskAltPath         = ibv.AttrAltPath
	MaskMinRNRTimer     = ibv.AttrMinRNRTimer
	MaskSQPSN           = ibv.AttrSQPSN
	MaskMaxDestRdAtomic = ibv.AttrMaxDestRdAtomic
	MaskPathMigState    = ibv.AttrPathMigState
	MaskCap             = ibv.AttrCap
	MaskDestQPN         = ibv.AttrDestQPN
)
