package shm

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// requiredSeals are the seals a region must carry before the daemon maps it:
// its size can never change again, so a mapping of it can never fault.
const requiredSeals = unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_SEAL

// Region is a memfd mapped shared and read-write into this process.
type Region struct {
	fd     int
	mem    []byte
	locked bool
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
	return &Region{fd: fd, mem: mem}, nil
}

// ErrNotSealed reports a file descriptor that is not a size-sealed memfd.
var ErrNotSealed = errors.New("shm: descriptor is not a memfd sealed against shrinking and growing")

// MapRegion maps size bytes of a region received from an untrusted peer. It
// takes ownership of fd. The descriptor must be a memfd whose size is sealed
// and at least size bytes long, so that no later action of the peer can make
// the mapping fault.
func MapRegion(fd int, size int) (*Region, error) {
	return mapRegion(fd, size, unix.PROT_READ|unix.PROT_WRITE)
}

// MapRegionReadOnly is MapRegion for a descriptor opened read-only.
func MapRegionReadOnly(fd int, size int) (*Region, error) { return mapRegion(fd, size, unix.PROT_READ) }

func mapRegion(fd int, size int, prot int) (*Region, error) {
	if size <= 0 {
		unix.Close(fd)
		return nil, fmt.Errorf("shm: region size %d: must be positive", size)
	}
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil || seals&(unix.F_SEAL_SHRINK|unix.F_SEAL_GROW) != unix.F_SEAL_SHRINK|unix.F_SEAL_GROW {
		unix.Close(fd)
		return nil, ErrNotSealed
	}
	// A hugetlbfs memfd gives up its pages' reservation when its owner
	// punches a hole (sealing size does not stop that), and refaulting it
	// with the pool empty is a SIGBUS in whoever touches it next.
	var fs unix.Statfs_t
	if err := unix.Fstatfs(fd, &fs); err != nil || fs.Type == unix.HUGETLBFS_MAGIC {
		unix.Close(fd)
		return nil, fmt.Errorf("shm: memfd on hugetlbfs (or unreadable): use an ordinary memfd")
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("shm: fstat: %w", err)
	}
	if st.Size < int64(size) {
		unix.Close(fd)
		return nil, fmt.Errorf("shm: memfd holds %d bytes, %d were declared", st.Size, size)
	}
	mem, err := unix.Mmap(fd, 0, size, prot, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("shm: mmap %d bytes: %w", size, err)
	}
	return &Region{fd: fd, mem: mem}, nil
}

// Bytes returns the mapping.
func (r *Region) Bytes() []byte { return r.mem }

// FD returns the memfd; it stays owned by the region.
func (r *Region) FD() int { return r.fd }

// Lock locks the mapping in RAM. Failure for lack of RLIMIT_MEMLOCK is a
// *MemlockError.
func (r *Region) Lock() error {
	if err := unix.Mlock(r.mem); err != nil {
		if errors.Is(err, unix.ENOMEM) || errors.Is(err, unix.EPERM) || errors.Is(err, unix.EAGAIN) {
			return newMemlockError(len(r.mem), err)
		}
		return fmt.Errorf("shm: mlock %d bytes: %w", len(r.mem), err)
	}
	r.locked = true
	return nil
}

// Close unmaps the region and closes its memfd.
func (r *Region) Close() error {
	if r.mem == nil {
		return nil
	}
	if r.locked {
		_ = unix.Munlock(r.mem)
	}
	err := unix.Munmap(r.mem)
	r.mem = nil
	if cerr := unix.Close(r.fd); err == nil {
		err = cerr
	}
	return err
}
