package engine

import (
	"encoding/binary"
	"testing"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/verbs"
)

// TestDeviceImmByteOrder: a device's work requests and completions carry
// immediate data as ibv_send_wr and ibv_wc do (network byte order: the
// bytes in memory are the value's big-endian bytes), the engine's WQEs and
// CQEs the value; an rkey to invalidate, or invalidated, stays as it is.
func TestDeviceImmByteOrder(t *testing.T) {
	const v = 0x01020304
	be := func(x uint32) []byte { return binary.BigEndian.AppendUint32(nil, x) }
	asDevice := func(x uint32) []byte { return binary.NativeEndian.AppendUint32(nil, x) }
	for _, tt := range []struct {
		op   abi.Opcode
		swap bool
	}{
		{abi.OpSendImm, true}, {abi.OpRDMAWriteImm, true}, {abi.OpSendInv, false}, {abi.OpSend, false},
	} {
		got := immToDevice(&abi.SendWQE{Opcode: tt.op, Imm: v})
		want := asDevice(v)
		if tt.swap {
			want = be(v)
		}
		if string(asDevice(got)) != string(want) {
			t.Errorf("opcode %v: the device's imm_data bytes % x, want % x", tt.op, asDevice(got), want)
		}
	}
	wire := binary.NativeEndian.Uint32(be(v)) // ibv_wc.imm_data of a value v
	if got := immFromDevice(&verbs.WC{Imm: wire, Flags: verbs.WCFlagWithImm}); got != v {
		t.Errorf("a completion with immediate %#x: the CQE holds %#x, want %#x", wire, got, uint32(v))
	}
	if got := immFromDevice(&verbs.WC{Imm: v, Flags: 4 /* IBV_WC_WITH_INV */}); got != v {
		t.Errorf("an invalidated rkey %#x: the CQE holds %#x", uint32(v), got)
	}
}
