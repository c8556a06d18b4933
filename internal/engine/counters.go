package engine

import (
	"sync/atomic"

	"github.com/vrdma/vrdma/internal/proto"
)

// Counters are an adapter port's traffic counters, updated lock-free.
type Counters struct {
	TxBytes, TxPackets, RxBytes, RxPackets atomic.Uint64
	TxErrors, RxErrors, RxDrops, RNRNaks   atomic.Uint64
	PathMemcpy, PathRDMA, PathTCP          atomic.Uint64 // messages sent by each path
	// The requesters' go-back-Ns by cause (mlx5's counter names) and the
	// packets they sent again.
	AckTimeouts, SeqNAKs, ImpliedNAKs, ResentPackets atomic.Uint64
	// Payload the daemon copied itself: the bytes (a memcpy-path message
	// once, a wire packet's payload as it is built from memory or put into
	// it) and the messages sent that way. The verbs path copies nothing:
	// PathVerbs and VerbsBytes count the send requests posted to a device
	// and their bytes, which the device moves.
	CopyBytes, CopyMsgs, PathVerbs, VerbsBytes atomic.Uint64
}

// Snapshot returns the counters as the command channel reports them.
func (c *Counters) Snapshot() proto.Counters {
	return proto.Counters{
		TxBytes: c.TxBytes.Load(), TxPackets: c.TxPackets.Load(),
		RxBytes: c.RxBytes.Load(), RxPackets: c.RxPackets.Load(),
		TxErrors: c.TxErrors.Load(), RxErrors: c.RxErrors.Load(),
		RxDrops: c.RxDrops.Load(), RNRNaks: c.RNRNaks.Load(),
		PathMemcpy: c.PathMemcpy.Load(), PathRDMA: c.PathRDMA.Load(), PathTCP: c.PathTCP.Load(),
		AckTimeouts: c.AckTimeouts.Load(), SeqNAKs: c.SeqNAKs.Load(), ImpliedNAKs: c.ImpliedNAKs.Load(),
		ResentPackets: c.ResentPackets.Load(),
		CopyBytes:     c.CopyBytes.Load(), CopyMsgs: c.CopyMsgs.Load(), PathVerbs: c.PathVerbs.Load(), VerbsBytes: c.VerbsBytes.Load(),
	}
}
