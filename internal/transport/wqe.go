package transport

import (
	"net/netip"

	"github.com/vrdma/vrdma/internal/abi"
)

// WQE is a send work request as the transport runs it: the owner resolves
// the local scatter/gather list to spans, which stay valid until Complete.
type WQE struct {
	ID         uint64
	Op         abi.Opcode
	Signaled   bool
	Fence      bool
	Solicited  bool
	Local      [][]byte // gather (SEND, WRITE) or scatter (READ, atomic result) spans
	Length     uint32   // total bytes of Local
	RemoteAddr uint64
	RKey       uint32
	Imm        uint32
	CompareAdd uint64
	Swap       uint64
	Tag        int // the owner's bookkeeping

	// XRC initiators only: the XRC SRQ the request is for (XRCETH).
	SRQN uint32

	// UD only.
	Dest    netip.Addr
	DestQPN uint32
	QKey    uint32

	// Requester state.
	firstPSN uint32
	npkts    uint32 // PSNs the request consumes
	resp     uint32 // READ: response packets received in order
	started  bool
}

// LastPSN returns the last PSN the request consumes (valid once sent).
func (w *WQE) LastPSN() uint32 { return (w.firstPSN + w.npkts - 1) & psnMask }

// readOrAtomic reports whether w takes one of the max_rd_atomic slots and
// is answered by a response rather than an ACK: READ, the atomics and
// ATOMIC WRITE (rxe counts it with them: check_init_depth).
func (w *WQE) readOrAtomic() bool {
	return w.Op == abi.OpRDMARead || w.Op.IsAtomic() || w.Op == abi.OpAtomicWrite
}

// packets returns how many PSNs a request of n bytes consumes at mtu.
func packets(op abi.Opcode, n uint32, mtu uint32) uint32 {
	if op.IsAtomic() || op == abi.OpAtomicWrite || n == 0 {
		return 1
	}
	return (n + mtu - 1) / mtu
}
