package engine

import (
	"sync"
	"sync/atomic"
)

// txBufSize holds the largest frame: IPv6 + UDP + the longest headers + a
// 4096-byte MTU + pad + ICRC, with room to spare.
const txBufSize = 4096 + 256

// txBatchLen is how many frames go to the link in one WriteBatch.
const txBatchLen = 32

type txBuf [txBufSize]byte

var txPool = sync.Pool{New: func() any { return new(txBuf) }}

// txBatch gathers frames for one link and sends them in batches. Buffers
// come from a shared pool and go back to it after each send, so an idle QP
// holds none.
type txBatch struct {
	link   Link
	bufs   [txBatchLen]*txBuf
	frames [txBatchLen][]byte
	n      int
	errs   *atomic.Uint64 // counts frames the link did not take
}

// buffer returns an empty buffer for the next frame to l, sending what is
// gathered first if the batch is full or for another link.
func (b *txBatch) buffer(l Link) []byte {
	if b.n == txBatchLen || (b.n > 0 && b.link != l) {
		b.flush()
	}
	b.link = l
	if b.bufs[b.n] == nil {
		b.bufs[b.n] = txPool.Get().(*txBuf)
	}
	return b.bufs[b.n][:0]
}

// add queues frame, which must be the buffer last returned, extended.
func (b *txBatch) add(frame []byte) {
	b.frames[b.n] = frame
	b.n++
}

// flush sends the gathered frames and gives their buffers back.
func (b *txBatch) flush() {
	if b.n == 0 {
		return
	}
	sent, err := b.link.WriteBatch(b.frames[:b.n])
	if (err != nil || sent < b.n) && b.errs != nil {
		b.errs.Add(uint64(b.n - sent))
	}
	for i := 0; i < b.n; i++ {
		b.frames[i] = nil
		txPool.Put(b.bufs[i])
		b.bufs[i] = nil
	}
	b.n = 0
}
