package verbs

import "fmt"

// UD QPs and address handles (csrc/ud.c). A UD QP is made with OpCreateQP
// (type QPTypeUD), takes receives with OpPostRecv and reports completions
// as RC ones do; these ops move it through its states with its Q_Key, make
// and destroy address handles, and post its sends.
const (
	OpModifyUDQP Op = 16 // u32 QP, u32 state, u32 qkey, u32 sq_psn → (empty)
	OpCreateAH   Op = 17 // AHAttr (32 bytes) → u32 handle, u32 0
	OpDestroyAH  Op = 18 // u32 handle → (empty)
	OpPostSendUD Op = 19 // u32 QP, u32 count, UDSendWRs → (empty)
)

const (
	modifyUDSize = 16
	ahSize       = 32
	udWRSize     = 40
)

// GRHSize is the Global Routing Header a UD receive holds in front of the
// payload: its first 40 bytes, as rdma-core delivers it.
const GRHSize = 40

// AHAttr is an address handle's destination: on RoCE a GRH (IsGlobal with
// the peer's GID, the local GID entry, hop limit, traffic class and flow
// label), on InfiniBand the peer's LID.
type AHAttr struct {
	DGID         [16]byte
	FlowLabel    uint32 // 20 bits
	DLID         uint16
	SGIDIndex    uint8
	HopLimit     uint8
	TrafficClass uint8
	SL           uint8 // 0..15
	IsGlobal     bool
}

// AH is an address handle of the device, in the helper.
type AH struct {
	Handle uint32
}

// AppendCreateAH appends an OpCreateAH request.
func AppendCreateAH(dst []byte, a AHAttr) []byte {
	dst = AppendHeader(dst, OpCreateAH, 0, 0, ahSize)
	dst = append(dst, a.DGID[:]...)
	dst = ne.AppendUint32(dst, a.FlowLabel)
	dst = ne.AppendUint16(dst, a.DLID)
	g := uint8(0)
	if a.IsGlobal {
		g = 1
	}
	dst = append(dst, a.SGIDIndex, a.HopLimit, a.TrafficClass, a.SL, g, 0)
	return ne.AppendUint32(dst, 0)
}

// ParseAH decodes an OpCreateAH reply's body.
func ParseAH(b []byte) (AH, error) {
	if len(b) != 8 {
		return AH{}, protoErrorf("an AH of %d bytes, want 8", len(b))
	}
	if pad := ne.Uint32(b[4:]); pad != 0 {
		return AH{}, protoErrorf("an AH with padding %#x", pad)
	}
	return AH{Handle: ne.Uint32(b)}, nil
}

// AppendModifyUDQP appends an OpModifyUDQP request: INIT takes qkey, RTS
// sqPSN, the others only the state.
func AppendModifyUDQP(dst []byte, qp QP, state, qkey, sqPSN uint32) []byte {
	dst = AppendHeader(dst, OpModifyUDQP, 0, 0, modifyUDSize)
	for _, v := range []uint32{qp.Handle, state, qkey, sqPSN} {
		dst = ne.AppendUint32(dst, v)
	}
	return dst
}

// UDSendWR is a work request for a UD QP's send queue: a SEND (or
// SEND_WITH_IMM) of one datagram to RemoteQPN through address handle AH.
type UDSendWR struct {
	WRID       uint64
	Opcode     uint32 // WRSend, WRSendWithImm
	Flags      uint32 // SendSignaled, SendSolicited
	Imm        uint32
	SGEs       []SGE
	AH         uint32 // AH.Handle
	RemoteQPN  uint32
	RemoteQKey uint32 // with its high bit set, the device uses the QP's own
}

// AppendPostSendUD appends an OpPostSendUD request posting wrs to qp as
// one batch; its limits are AppendPostSend's.
func AppendPostSendUD(dst []byte, qp QP, wrs []UDSendWR) ([]byte, error) {
	n := 8
	for i := range wrs {
		if len(wrs[i].SGEs) > MaxWRSGE {
			return dst, fmt.Errorf("verbs: work request %d has %d SGEs, the helper posts at most %d", i, len(wrs[i].SGEs), MaxWRSGE)
		}
		n += udWRSize + len(wrs[i].SGEs)*sgeSize
	}
	if err := checkBatch(len(wrs), n); err != nil {
		return dst, err
	}
	dst = AppendHeader(dst, OpPostSendUD, 0, 0, n)
	dst = ne.AppendUint32(ne.AppendUint32(dst, qp.Handle), uint32(len(wrs)))
	for i := range wrs {
		w := &wrs[i]
		dst = ne.AppendUint64(dst, w.WRID)
		for _, v := range []uint32{w.Opcode, w.Flags, w.Imm, uint32(len(w.SGEs)), w.AH, w.RemoteQPN, w.RemoteQKey, 0} {
			dst = ne.AppendUint32(dst, v)
		}
		dst = appendSGEs(dst, w.SGEs)
	}
	return dst, nil
}
