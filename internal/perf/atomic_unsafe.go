package perf

import (
	"sync/atomic"
	"unsafe"
)

// atomicLoadByte reads a byte another thread (or process) writes, through
// the 32-bit word that holds it, so that the load is not hoisted out of a
// spin loop.
func atomicLoadByte(p *byte) byte {
	off := uintptr(unsafe.Pointer(p)) & 3
	word := (*uint32)(unsafe.Add(unsafe.Pointer(p), -int(off)))
	return byte(atomic.LoadUint32(word) >> (8 * off))
}
