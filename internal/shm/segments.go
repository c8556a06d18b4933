package shm

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Segment is whole pages [Offset, Offset+Length) of a memfd, a piece of a
// region mapped from several (MapSegments).
type Segment struct {
	FD     int
	Offset uint64
	Length uint64
}

// MapSegments maps segs one after the other as one contiguous mapping, and
// returns bytes [off, off+size) of it as a region. Each segment must be
// whole pages of a memfd that checkRegionFD accepts and that holds them;
// off must fall in the first page and off+size end in the last, so that
// every mapped page holds some of the region. It takes ownership of every
// segment's descriptor, whatever it returns, and keeps only the first's
// open (Region.FD): the mappings hold the memfds. prot is unix.PROT_READ or
// unix.PROT_READ|unix.PROT_WRITE.
func MapSegments(segs []Segment, off, size uint64, prot int) (*Region, error) {
	fds := make([]int, len(segs))
	for i, s := range segs {
		fds[i] = s.FD
	}
	fail := func(err error) (*Region, error) {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return nil, err
	}
	page := uint64(unix.Getpagesize())
	if len(segs) == 0 {
		return fail(fmt.Errorf("shm: no segments"))
	}
	var total uint64
	for i, s := range segs {
		if s.Length == 0 || s.Offset%page != 0 || s.Length%page != 0 {
			return fail(fmt.Errorf("shm: segment %d (offset %d, length %d): offset and length must be multiples of the page size (%d), the length positive", i, s.Offset, s.Length, page))
		}
		if s.Offset+s.Length < s.Offset || total+s.Length < total {
			return fail(fmt.Errorf("shm: segment %d (offset %d, length %d) overflows 64 bits", i, s.Offset, s.Length))
		}
		total += s.Length
		if err := checkRegionFD(s.FD, s.Offset+s.Length); err != nil {
			return fail(fmt.Errorf("segment %d: %w", i, err))
		}
	}
	if size == 0 || off >= page || off+size < off || off+size > total || total-(off+size) >= page {
		return fail(fmt.Errorf("shm: bytes [%d, %d) of %d bytes of segments: the region must start in the first page and end in the last", off, off+size, total))
	}
	if total > uint64(^uintptr(0)>>1) {
		return fail(fmt.Errorf("shm: %d bytes of segments do not fit the address space", total))
	}
	// Reserve the whole range, then map each segment over its place in it:
	// no other mapping can land between them.
	base, err := unix.MmapPtr(-1, 0, nil, uintptr(total), unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return fail(fmt.Errorf("shm: reserve %d bytes: %w", total, err))
	}
	var at uintptr
	for i, s := range segs {
		if _, err := unix.MmapPtr(s.FD, int64(s.Offset), unsafe.Add(base, at), uintptr(s.Length), prot, unix.MAP_SHARED|unix.MAP_FIXED); err != nil {
			_ = unix.MunmapPtr(base, uintptr(total))
			return fail(fmt.Errorf("shm: map segment %d (%d bytes at offset %d): %w", i, s.Length, s.Offset, err))
		}
		at += uintptr(s.Length)
	}
	// The mappings keep the memfds; only the first descriptor is kept (the
	// daemon charges a region one, fdCost), the others are closed.
	for _, fd := range fds[1:] {
		unix.Close(fd)
	}
	pages := unsafe.Slice((*byte)(base), total)
	return &Region{fd: fds[0], segs: len(segs), mem: pages[off : off+size], off: segs[0].Offset + off, pages: pages, raw: true}, nil
}

// Segments returns how many memfds the region is mapped from: 1 but for
// MapSegments.
func (r *Region) Segments() int { return max(1, r.segs) }
