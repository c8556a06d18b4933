package engine

import (
	"encoding/binary"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/verbs"
)

// Immediate data on a device: verbs' SendWR.Imm, UDSendWR.Imm and WC.Imm
// are as ibv_send_wr and ibv_wc hold them (__be32, network byte order),
// while the engine's WQEs and CQEs hold the value (the guest library
// writes ntohl(imm_data) and reads htonl of it). Without the conversion a
// native peer saw every immediate byte-swapped (udaddy's, which names the
// QP to answer). An rkey to invalidate, or invalidated, shares the field
// and is in host order on both sides.

// immToDevice is w's immediate as the device's work request takes it.
func immToDevice(w *abi.SendWQE) uint32 {
	if w.Opcode == abi.OpSendImm || w.Opcode == abi.OpRDMAWriteImm {
		return netOrder(w.Imm)
	}
	return w.Imm
}

// immFromDevice is a device completion's immediate as a CQE holds it.
func immFromDevice(w *verbs.WC) uint32 {
	if w.Flags&verbs.WCFlagWithImm != 0 {
		return netOrder(w.Imm)
	}
	return w.Imm
}

// netOrder swaps between a value and its network-order bits as this
// host's uint32 (its own inverse).
func netOrder(v uint32) uint32 {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], v)
	return binary.NativeEndian.Uint32(b[:])
}
