package shm

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// requiredSeals are the seals a region must carry before the daemon maps it:
// its size can never change again, so a mapping of it can never fault.
const requiredSeals = unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_SEAL

// Region is a memfd, or a range of one, mapped shared into this process.
type Region struct {
	fd     int
	mem    []byte // the region: bytes [off, off+len(mem)) of the memfd
	off    uint64
	pages  []byte // the mapping: from the page that holds off to the end of mem
	locked bool
	segs   int  // MapSegments: how many memfds the mapping is made of
	raw    bool // MapSegments: pages was mapped by MmapPtr, not unix.Mmap
}

// NewRegion creates a memfd of size bytes, seals its size and maps it.
func NewRegion(name string, size int) (*Region, error) {
	if size <= 0 {
		return nil, fmt.Errorf("shm: region size %d: must be positive", size)
	}
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("shm: memfd_create: %w", err)
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("shm: size memfd to %d bytes: %w", size, err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, requiredSeals); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("shm: seal memfd: %w", err)
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("shm: mmap %d bytes: %w", size, err)
	}
	return &Region{fd: fd, mem: mem, pages: mem}, nil
}

// ErrNotSealed reports a file descriptor that is not a size-sealed memfd.
var ErrNotSealed = errors.New("shm: descriptor is not a memfd sealed against shrinking and growing")

// MapRegion maps size bytes of a region received from an untrusted peer. It
// takes ownership of fd. The descriptor must be a memfd whose size is sealed
// and at least size bytes long, so that no later action of the peer can make
// the mapping fault.
func MapRegion(fd int, size int) (*Region, error) {
	return mapRegion(fd, 0, sizeArg(size), unix.PROT_READ|unix.PROT_WRITE)
}

// MapRegionReadOnly is MapRegion for a descriptor opened read-only.
func MapRegionReadOnly(fd int, size int) (*Region, error) {
	return mapRegion(fd, 0, sizeArg(size), unix.PROT_READ)
}

// MapRegionRange is MapRegion for the bytes [off, off+size) of the memfd,
// which must hold at least off+size bytes: the pages that hold the range are
// mapped (and locked by Lock), and Bytes is exactly the range. Byte i of the
// range sits at the same offset within its page as byte off+i of the memfd.
func MapRegionRange(fd int, off, size uint64) (*Region, error) {
	return mapRegion(fd, off, size, unix.PROT_READ|unix.PROT_WRITE)
}

// MapRegionRangeReadOnly is MapRegionRange for a descriptor opened read-only.
func MapRegionRangeReadOnly(fd int, off, size uint64) (*Region, error) {
	return mapRegion(fd, off, size, unix.PROT_READ)
}

// MappedSize returns how many bytes of a memfd MapRegionRange(fd, off,
// size) maps (and Region.Mapped then reports): size, and the part of off's
// page before off. It lets a caller count a range before mapping it.
func MappedSize(off, size uint64) uint64 { return off&uint64(unix.Getpagesize()-1) + size }

// sizeArg maps a negative size to 0, which mapRegion refuses.
func sizeArg(size int) uint64 { return uint64(max(size, 0)) }

func mapRegion(fd int, off, size uint64, prot int) (*Region, error) {
	if size == 0 {
		unix.Close(fd)
		return nil, fmt.Errorf("shm: region size must be positive")
	}
	end := off + size
	if end < off {
		unix.Close(fd)
		return nil, fmt.Errorf("shm: offset %d + size %d overflows 64 bits", off, size)
	}
	if err := checkRegionFD(fd, end); err != nil {
		unix.Close(fd)
		if off != 0 && errors.Is(err, errTooSmall) {
			return nil, fmt.Errorf("%w (offset %d + length %d)", err, off, size)
		}
		return nil, err
	}
	base := off &^ uint64(unix.Getpagesize()-1)
	pages, err := unix.Mmap(fd, int64(base), int(end-base), prot, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("shm: mmap %d bytes at offset %d: %w", end-base, base, err)
	}
	return &Region{fd: fd, mem: pages[off-base:], off: off, pages: pages}, nil
}

// errTooSmall marks a memfd smaller than the bytes declared of it.
var errTooSmall = errors.New("shm: memfd too small")

// checkRegionFD checks that fd is a memfd an untrusted peer cannot make a
// mapping of fault in: its size sealed, not on hugetlbfs, and at least end
// bytes long.
func checkRegionFD(fd int, end uint64) error {
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil || seals&(unix.F_SEAL_SHRINK|unix.F_SEAL_GROW) != unix.F_SEAL_SHRINK|unix.F_SEAL_GROW {
		return ErrNotSealed
	}
	// A hugetlbfs memfd gives up its pages' reservation when its owner
	// punches a hole (sealing size does not stop that), and refaulting it
	// with the pool empty is a SIGBUS in whoever touches it next.
	var fs unix.Statfs_t
	if err := unix.Fstatfs(fd, &fs); err != nil || fs.Type == unix.HUGETLBFS_MAGIC {
		return fmt.Errorf("shm: memfd on hugetlbfs (or unreadable): use an ordinary memfd")
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("shm: fstat: %w", err)
	}
	// st.Size is at most 2^63-1, so once end fits in it so does the rest.
	if st.Size < 0 || uint64(st.Size) < end {
		return fmt.Errorf("%w: it holds %d bytes, %d were declared", errTooSmall, st.Size, end)
	}
	return nil
}

// Bytes returns the region's memory.
func (r *Region) Bytes() []byte { return r.mem }

// Offset returns the offset in the memfd of the region's first byte.
func (r *Region) Offset() uint64 { return r.off }

// Mapped returns how many bytes of the memfd are mapped for the region: its
// length, plus, for a range, the part of its first page before it. Lock
// locks this much.
func (r *Region) Mapped() int { return len(r.pages) }

// FD returns the memfd; it stays owned by the region.
func (r *Region) FD() int { return r.fd }

// Lock locks the mapping in RAM. Failure for lack of RLIMIT_MEMLOCK is a
// *MemlockError.
func (r *Region) Lock() error {
	if err := unix.Mlock(r.pages); err != nil {
		if errors.Is(err, unix.ENOMEM) || errors.Is(err, unix.EPERM) || errors.Is(err, unix.EAGAIN) {
			return newMemlockError(len(r.pages), err)
		}
		return fmt.Errorf("shm: mlock %d bytes: %w", len(r.pages), err)
	}
	r.locked = true
	return nil
}

// Close unmaps the region and closes its memfd.
func (r *Region) Close() error {
	if r.mem == nil {
		return nil
	}
	// No munlock first: unmapping a locked mapping unlocks its pages, and
	// a separate munlock walks them all once more.
	var err error
	if r.raw {
		err = unix.MunmapPtr(unsafe.Pointer(unsafe.SliceData(r.pages)), uintptr(len(r.pages)))
	} else {
		err = unix.Munmap(r.pages)
	}
	if err != nil && r.locked {
		_ = unix.Munlock(r.pages) // still mapped: at least not locked
	}
	r.mem, r.pages = nil, nil
	if cerr := unix.Close(r.fd); err == nil {
		err = cerr
	}
	return err
}
