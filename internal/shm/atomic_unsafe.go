package shm

import (
	"sync/atomic"
	"unsafe"
)

// The helpers below read and write 32- and 64-bit words inside shared
// mappings. off must be aligned to the word size and inside b; callers
// validate offsets before calling (the ring layouts guarantee alignment).

// Load32 atomically loads the uint32 at b[off:].
func Load32(b []byte, off int) uint32 {
	_ = b[off+3]
	return atomic.LoadUint32((*uint32)(unsafe.Pointer(&b[off])))
}

// Store32 atomically stores v at b[off:].
func Store32(b []byte, off int, v uint32) {
	_ = b[off+3]
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&b[off])), v)
}

// Swap32 atomically swaps v into b[off:] and returns the old value.
func Swap32(b []byte, off int, v uint32) uint32 {
	_ = b[off+3]
	return atomic.SwapUint32((*uint32)(unsafe.Pointer(&b[off])), v)
}

// Load64 atomically loads the uint64 at b[off:].
func Load64(b []byte, off int) uint64 {
	_ = b[off+7]
	return atomic.LoadUint64((*uint64)(unsafe.Pointer(&b[off])))
}

// CompareAndSwap64 atomically compares b[off:] with old and, if equal,
// stores new. It returns the value found.
func CompareAndSwap64(b []byte, off int, old, new uint64) uint64 {
	_ = b[off+7]
	p := (*uint64)(unsafe.Pointer(&b[off]))
	for {
		if atomic.CompareAndSwapUint64(p, old, new) {
			return old
		}
		if cur := atomic.LoadUint64(p); cur != old {
			return cur
		}
	}
}

// Store64 atomically stores v at b[off:] (an ATOMIC WRITE: one store,
// after every store before it).
func Store64(b []byte, off int, v uint64) {
	_ = b[off+7]
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&b[off])), v)
}

// FetchAdd64 atomically adds v to b[off:] and returns the previous value.
func FetchAdd64(b []byte, off int, v uint64) uint64 {
	_ = b[off+7]
	return atomic.AddUint64((*uint64)(unsafe.Pointer(&b[off])), v) - v
}

// Aligned8 reports whether b[off:] sits on an 8-byte boundary in memory.
func Aligned8(b []byte, off int) bool {
	return uintptr(unsafe.Pointer(&b[off]))%8 == 0
}

// Addr returns the address of the first byte of b (0 for an empty slice).
// The client library advertises it as the virtual address of a region.
func Addr(b []byte) uint64 {
	if len(b) == 0 {
		return 0
	}
	return uint64(uintptr(unsafe.Pointer(&b[0])))
}
