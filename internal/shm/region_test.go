package shm

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// memfd creates a memfd of size bytes with the given seals (0 = unsealed).
func memfd(t *testing.T, size int, seals int) int {
	t.Helper()
	fd, err := unix.MemfdCreate("shm-test", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		t.Fatalf("memfd_create: %v", err)
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		unix.Close(fd)
		t.Fatalf("ftruncate: %v", err)
	}
	if seals != 0 {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals); err != nil {
			unix.Close(fd)
			t.Fatalf("seal: %v", err)
		}
	}
	return fd
}

// closed reports whether fd is no longer open.
func closed(fd int) bool {
	_, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	return errors.Is(err, unix.EBADF)
}

func TestNewRegion(t *testing.T) {
	r, err := NewRegion("shm-test", 10000)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if len(r.Bytes()) != 10000 {
		t.Fatalf("mapping of %d bytes", len(r.Bytes()))
	}
	seals, err := unix.FcntlInt(uintptr(r.FD()), unix.F_GET_SEALS, 0)
	if err != nil {
		t.Fatal(err)
	}
	if seals&requiredSeals != requiredSeals {
		t.Fatalf("seals %#x lack %#x", seals, requiredSeals)
	}
	// The size can no longer change.
	if err := unix.Ftruncate(r.FD(), 100); err == nil {
		t.Fatal("a sealed region shrank")
	}
	if err := unix.Ftruncate(r.FD(), 1<<20); err == nil {
		t.Fatal("a sealed region grew")
	}
	if !Aligned8(r.Bytes(), 0) || Addr(r.Bytes()) == 0 || Addr(r.Bytes())%uint64(os.Getpagesize()) != 0 {
		t.Fatalf("mapping at %#x is not page aligned", Addr(r.Bytes()))
	}
	for _, size := range []int{0, -1} {
		if _, err := NewRegion("shm-test", size); err == nil {
			t.Errorf("NewRegion(%d) succeeded", size)
		}
	}
}

func TestMapRegionShares(t *testing.T) {
	r, err := NewRegion("shm-test", 8192)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	fd, err := unix.Dup(r.FD())
	if err != nil {
		t.Fatal(err)
	}
	// A peer may map less than the whole region.
	m, err := MapRegion(fd, 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if len(m.Bytes()) != 4096 {
		t.Fatalf("mapped %d bytes", len(m.Bytes()))
	}
	Store32(r.Bytes(), 128, 0xCAFEBABE)
	if got := Load32(m.Bytes(), 128); got != 0xCAFEBABE {
		t.Fatalf("peer mapping reads %#x", got)
	}
	m.Bytes()[4095] = 7
	if r.Bytes()[4095] != 7 {
		t.Fatal("write through the peer mapping not visible")
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if !closed(fd) {
		t.Error("Close left the memfd open")
	}
}

func TestMapRegionRejects(t *testing.T) {
	pipe := func(t *testing.T) int {
		var p [2]int
		if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
			t.Fatal(err)
		}
		unix.Close(p[1])
		return p[0]
	}
	tests := []struct {
		name    string
		fd      func(t *testing.T) int
		size    int
		sealErr bool   // want ErrNotSealed
		msg     string // the error mentions this
	}{
		{"unsealed memfd", func(t *testing.T) int { return memfd(t, 4096, 0) }, 4096, true, "not a memfd sealed"},
		{"shrink seal only", func(t *testing.T) int { return memfd(t, 4096, unix.F_SEAL_SHRINK) }, 4096, true, "not a memfd sealed"},
		{"grow seal only", func(t *testing.T) int { return memfd(t, 4096, unix.F_SEAL_GROW) }, 4096, true, "not a memfd sealed"},
		{"pipe", pipe, 4096, true, "not a memfd sealed"},
		{"regular file", func(t *testing.T) int {
			f, err := os.CreateTemp(t.TempDir(), "region")
			if err != nil {
				t.Fatal(err)
			}
			if err := f.Truncate(4096); err != nil {
				t.Fatal(err)
			}
			fd, err := unix.Dup(int(f.Fd()))
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			return fd
		}, 4096, true, "not a memfd sealed"},
		{"smaller than declared", func(t *testing.T) int {
			return memfd(t, 4096, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW)
		}, 8192, false, "holds 4096 bytes, 8192 were declared"},
		{"empty memfd", func(t *testing.T) int {
			return memfd(t, 0, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW)
		}, 1, false, "holds 0 bytes, 1 were declared"},
		{"zero size", func(t *testing.T) int { return memfd(t, 4096, requiredSeals) }, 0, false, "must be positive"},
		{"negative size", func(t *testing.T) int { return memfd(t, 4096, requiredSeals) }, -4096, false, "must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fd := tt.fd(t)
			r, err := MapRegion(fd, tt.size)
			if err == nil {
				r.Close()
				t.Fatal("MapRegion accepted it")
			}
			if r != nil {
				t.Error("non-nil region with an error")
			}
			if got := errors.Is(err, ErrNotSealed); got != tt.sealErr {
				t.Errorf("errors.Is(%v, ErrNotSealed) = %v, want %v", err, got, tt.sealErr)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q does not say %q", err, tt.msg)
			}
			if !closed(fd) {
				unix.Close(fd)
				t.Error("MapRegion did not close the descriptor it owns")
			}
		})
	}
}

func TestMapRegionBadFD(t *testing.T) {
	if _, err := MapRegion(-1, 4096); !errors.Is(err, ErrNotSealed) {
		t.Fatalf("fd -1: %v", err)
	}
}

// vmLck returns the process's locked memory, VmLck of /proc/self/status,
// in KiB.
func vmLck(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc/self/status: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmLck:"); ok {
			var kib int
			if _, err := fmt.Sscanf(rest, "%d kB", &kib); err == nil {
				return kib
			}
		}
	}
	t.Skip("no VmLck line in /proc/self/status")
	return 0
}

// TestRegionCloseUnlocks: Close of a locked region (which only unmaps it)
// leaves none of its pages locked.
func TestRegionCloseUnlocks(t *testing.T) {
	before := vmLck(t)
	r, err := NewRegion("shm-test", 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	var me *MemlockError
	if err := r.Lock(); errors.As(err, &me) {
		r.Close()
		t.Skipf("RLIMIT_MEMLOCK too small for 64 KiB here: %v", err)
	} else if err != nil {
		t.Fatal(err)
	}
	if during := vmLck(t); during < before+64 {
		t.Fatalf("VmLck %d kB with the region locked, %d kB before: Lock locked nothing", during, before)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if after := vmLck(t); after != before {
		t.Fatalf("VmLck %d kB after Close, %d kB before: the region's pages stay locked", after, before)
	}
}

func TestRegionLock(t *testing.T) {
	r, err := NewRegion("shm-test", 4096)
	if err != nil {
		t.Fatal(err)
	}
	var me *MemlockError
	if err := r.Lock(); errors.As(err, &me) {
		r.Close()
		t.Skipf("RLIMIT_MEMLOCK too small for one page here: %v", err)
	} else if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("Close of a locked region: %v", err)
	}
}

// TestRegionLockMemlockError lowers RLIMIT_MEMLOCK and checks that Lock
// explains the failure. Root has CAP_IPC_LOCK, which ignores the limit: the
// root variant of this test lives with the privileged tests.
func TestRegionLockMemlockError(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("running as root: CAP_IPC_LOCK ignores RLIMIT_MEMLOCK, so mlock cannot fail for lack of it")
	}
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &old); err != nil {
		t.Fatal(err)
	}
	low := unix.Rlimit{Cur: 0, Max: old.Max}
	if err := unix.Setrlimit(unix.RLIMIT_MEMLOCK, &low); err != nil {
		t.Fatalf("lower RLIMIT_MEMLOCK: %v", err)
	}
	defer func() {
		if err := unix.Setrlimit(unix.RLIMIT_MEMLOCK, &old); err != nil {
			t.Errorf("restore RLIMIT_MEMLOCK: %v", err)
		}
	}()
	r, err := NewRegion("shm-test", 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	err = r.Lock()
	var me *MemlockError
	if !errors.As(err, &me) {
		t.Fatalf("Lock = %v (%T), want *MemlockError", err, err)
	}
	if me.Asked != 64<<10 || me.Limit != 0 {
		t.Errorf("Asked=%d Limit=%d", me.Asked, me.Limit)
	}
	if !errors.Is(err, unix.ENOMEM) && !errors.Is(err, unix.EPERM) && !errors.Is(err, unix.EAGAIN) {
		t.Errorf("error does not unwrap to the system call's: %v", me.Err)
	}
	for _, s := range []string{"65536 bytes", "RLIMIT_MEMLOCK is 0 bytes", "ulimit -l"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("message %q lacks %q", err, s)
		}
	}
}

func TestMemlockErrorMessage(t *testing.T) {
	e := &MemlockError{Asked: 2 << 20, Limit: 64 << 10, Err: unix.ENOMEM}
	for _, s := range []string{"2097152 bytes (2048 KiB)", "65536 bytes (64 KiB)", "ulimit -l unlimited", "limits.conf", "LimitMEMLOCK=infinity"} {
		if !strings.Contains(e.Error(), s) {
			t.Errorf("message %q lacks %q", e, s)
		}
	}
	if !errors.Is(e, unix.ENOMEM) {
		t.Error("does not unwrap")
	}
	e = &MemlockError{Asked: 4096, Limit: unix.RLIM_INFINITY, Err: unix.EAGAIN}
	if !strings.Contains(e.Error(), "RLIMIT_MEMLOCK is unlimited") {
		t.Errorf("message %q", e)
	}
}

// TestMapRegionRange maps ranges that start inside a page of the memfd: the
// region's bytes are exactly the range, the pages that hold it are what is
// mapped, and the range keeps its alignment within the page.
func TestMapRegionRange(t *testing.T) {
	page := uint64(os.Getpagesize())
	r, err := NewRegion("shm-test", int(4*page))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for i := range r.Bytes() {
		r.Bytes()[i] = byte(i * 7)
	}
	tests := []struct {
		name       string
		off, size  uint64
		wantMapped int
	}{
		{"whole memfd", 0, 4 * page, int(4 * page)},
		{"first bytes", 0, 100, 100},
		{"inside the first page", 100, 200, 300},
		{"across a page boundary", page - 8, 16, int(page + 8)},
		{"second page on", page + 100, 2000, 2100},
		{"a whole page", 2 * page, page, int(page)},
		{"to the last byte", 3*page + 1, page - 1, int(page)},
	}
	for _, tt := range tests {
		for _, readOnly := range []bool{false, true} {
			mapRange, mode := MapRegionRange, "read-write"
			if readOnly {
				mapRange, mode = MapRegionRangeReadOnly, "read-only"
			}
			t.Run(tt.name+"/"+mode, func(t *testing.T) {
				fd, err := unix.Dup(r.FD())
				if err != nil {
					t.Fatal(err)
				}
				m, err := mapRange(fd, tt.off, tt.size)
				if err != nil {
					t.Fatalf("MapRegionRange(%d, %d): %v", tt.off, tt.size, err)
				}
				defer m.Close()
				b := m.Bytes()
				if uint64(len(b)) != tt.size || m.Offset() != tt.off || m.Mapped() != tt.wantMapped {
					t.Fatalf("len %d offset %d mapped %d, want %d %d %d", len(b), m.Offset(), m.Mapped(), tt.size, tt.off, tt.wantMapped)
				}
				if got := MappedSize(tt.off, tt.size); got != uint64(tt.wantMapped) {
					t.Errorf("MappedSize(%d, %d) = %d, the mapping is %d bytes", tt.off, tt.size, got, tt.wantMapped)
				}
				if Addr(b)%page != tt.off%page {
					t.Errorf("byte 0 at %#x: not at offset %d of its page", Addr(b), tt.off%page)
				}
				for _, i := range []uint64{0, tt.size / 2, tt.size - 1} {
					if b[i] != r.Bytes()[tt.off+i] {
						t.Fatalf("byte %d reads %d, memfd byte %d is %d", i, b[i], tt.off+i, r.Bytes()[tt.off+i])
					}
				}
				if !readOnly {
					b[tt.size-1] ^= 0xFF
					if b[tt.size-1] != r.Bytes()[tt.off+tt.size-1] {
						t.Fatal("a write through the range is not at its memfd offset")
					}
					b[tt.size-1] ^= 0xFF
				}
				if err := m.Lock(); err != nil {
					var me *MemlockError
					if !errors.As(err, &me) {
						t.Fatal(err)
					}
				}
				if err := m.Close(); err != nil {
					t.Fatal(err)
				}
				if !closed(fd) {
					t.Error("Close left the memfd open")
				}
			})
		}
	}
}

func TestMapRegionRangeRejects(t *testing.T) {
	sealed := func(t *testing.T) int { return memfd(t, 8192, requiredSeals) }
	tests := []struct {
		name      string
		off, size uint64
		msg       string
	}{
		{"zero size", 100, 0, "must be positive"},
		{"end past the memfd", 4096, 4097, "holds 8192 bytes, 8193 were declared (offset 4096 + length 4097)"},
		{"offset past the memfd", 8192, 1, "holds 8192 bytes, 8193 were declared"},
		{"offset + size wraps", ^uint64(0) - 10, 4096, "overflows"},
		{"size wraps alone", 1, ^uint64(0), "overflows"},
		{"end above 2^63", 1 << 63, 1, "holds 8192 bytes"},
		{"size above int", 0, 1 << 63, "holds 8192 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fd := sealed(t)
			r, err := MapRegionRange(fd, tt.off, tt.size)
			if err == nil {
				r.Close()
				t.Fatal("MapRegionRange accepted it")
			}
			if r != nil {
				t.Error("non-nil region with an error")
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q does not say %q", err, tt.msg)
			}
			if !closed(fd) {
				unix.Close(fd)
				t.Error("MapRegionRange did not close the descriptor it owns")
			}
		})
	}
}
