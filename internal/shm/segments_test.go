package shm

import (
	"bytes"
	"errors"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// sealedMemfd returns a sealed memfd of pages pages, each filled with its
// fill byte, and its own mapping, for checking.
func sealedMemfd(t *testing.T, fill ...byte) int {
	t.Helper()
	page := os.Getpagesize()
	fd, err := unix.MemfdCreate("segments-test", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range fill {
		if _, err := unix.Write(fd, bytes.Repeat([]byte{b}, page)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, requiredSeals); err != nil {
		t.Fatal(err)
	}
	return fd
}

// TestMapSegmentsIsOneContiguousRegion: the segments' pages appear one
// after the other, the region is the bytes asked of them, writes reach
// the memfds, the region holds one descriptor (the daemon charges a
// region one: a tenant's 16-segment regions held 16 each), and Close
// closes it.
func TestMapSegmentsIsOneContiguousRegion(t *testing.T) {
	page := uint64(os.Getpagesize())
	a, b := sealedMemfd(t, 'a', 'A', 'x'), sealedMemfd(t, 'b')
	bView, err := unix.Dup(b) // the test's own look at b's memfd
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(bView)
	r, err := MapSegments([]Segment{{FD: a, Offset: page, Length: page}, {FD: b, Offset: 0, Length: page}}, 10, 2*page-20, unix.PROT_READ|unix.PROT_WRITE)
	if err != nil {
		t.Fatal(err)
	}
	mem := r.Bytes()
	if uint64(len(mem)) != 2*page-20 || r.Mapped() != int(2*page) || r.Segments() != 2 {
		t.Fatalf("region of %d bytes, %d mapped, %d segments; want %d, %d, 2", len(mem), r.Mapped(), r.Segments(), 2*page-20, 2*page)
	}
	want := append(bytes.Repeat([]byte{'A'}, int(page-10)), bytes.Repeat([]byte{'b'}, int(page-10))...)
	if !bytes.Equal(mem, want) {
		t.Fatal("the region is not the segments' bytes side by side")
	}
	if _, err := unix.FcntlInt(uintptr(b), unix.F_GETFD, 0); !errors.Is(err, unix.EBADF) {
		t.Errorf("the second segment's descriptor %d is still open once mapped", b)
	}
	mem[len(mem)-1] = 'w'
	got := make([]byte, 1)
	if _, err := unix.Pread(bView, got, int64(page-11)); err != nil || got[0] != 'w' {
		t.Fatalf("a write to the region did not reach the second memfd: %q %v", got, err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	for _, fd := range []int{a} {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); !errors.Is(err, unix.EBADF) {
			t.Errorf("descriptor %d still open after Close", fd)
		}
	}
}

// TestMapSegmentsRefusesLies: segments that are not whole pages, lie
// about their memfd's size or seals, or a region that does not fill them
// are refused, and every descriptor is closed.
func TestMapSegmentsRefusesLies(t *testing.T) {
	page := uint64(os.Getpagesize())
	unsealed := func(t *testing.T) int {
		fd, err := unix.MemfdCreate("segments-test", unix.MFD_CLOEXEC)
		if err != nil {
			t.Fatal(err)
		}
		if err := unix.Ftruncate(fd, int64(page)); err != nil {
			t.Fatal(err)
		}
		return fd
	}
	tests := []struct {
		name      string
		segs      func(t *testing.T) []Segment
		off, size uint64
	}{
		{"no segments", func(*testing.T) []Segment { return nil }, 0, 1},
		{"offset not a page", func(t *testing.T) []Segment { return []Segment{{sealedMemfd(t, 'a', 'a'), 1, page}} }, 0, 1},
		{"beyond its memfd", func(t *testing.T) []Segment { return []Segment{{sealedMemfd(t, 'a'), page, page}} }, 0, 1},
		{"unsealed", func(t *testing.T) []Segment { return []Segment{{sealedMemfd(t, 'a'), 0, page}, {unsealed(t), 0, page}} }, 0, page + 1},
		{"overflowing", func(t *testing.T) []Segment { return []Segment{{sealedMemfd(t, 'a'), -page, page}} }, 0, 1},
		{"region outside", func(t *testing.T) []Segment { return []Segment{{sealedMemfd(t, 'a'), 0, page}} }, 1, page},
		{"an unused segment", func(t *testing.T) []Segment {
			return []Segment{{sealedMemfd(t, 'a'), 0, page}, {sealedMemfd(t, 'b'), 0, page}}
		}, 0, 1},
		{"empty region", func(t *testing.T) []Segment { return []Segment{{sealedMemfd(t, 'a'), 0, page}} }, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			segs := tt.segs(t)
			if r, err := MapSegments(segs, tt.off, tt.size, unix.PROT_READ); err == nil {
				r.Close()
				t.Fatal("accepted")
			}
			for _, s := range segs {
				if _, err := unix.FcntlInt(uintptr(s.FD), unix.F_GETFD, 0); !errors.Is(err, unix.EBADF) {
					t.Errorf("descriptor %d still open after the refusal", s.FD)
					unix.Close(s.FD)
				}
			}
		})
	}
}
