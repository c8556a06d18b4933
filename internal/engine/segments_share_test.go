package engine

import (
	"testing"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/proto"
	"github.com/vrdma/vrdma/internal/shm"
	"golang.org/x/sys/unix"
)

// TestShareWithRefusesARegionOfSeveralMemfds: one descriptor and offset
// cannot describe a region mapped from several memfds (the guest
// library's registrations over pages moved for earlier ones), so the
// direct path is refused it and the daemon's path serves it.
func TestShareWithRefusesARegionOfSeveralMemfds(t *testing.T) {
	a := NewAdapter("i", "vrdma0", 0, [6]byte{2, 0, 0, 0, 0, 8}, false)
	pd := a.NewPD()
	cq, err := NewCQ(16)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cq.Close)
	q, err := NewQP(QPConfig{PD: pd, Type: abi.QPTypeRC, SendCQ: cq, RecvCQ: cq, Events: &events{},
		Caps: proto.QPCaps{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Destroy()
	page := uint64(unix.Getpagesize())
	var segs []shm.Segment
	for range 2 {
		fd, err := unix.MemfdCreate("t", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
		if err != nil {
			t.Fatal(err)
		}
		if err := unix.Ftruncate(fd, int64(page)); err != nil {
			t.Fatal(err)
		}
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW); err != nil {
			t.Fatal(err)
		}
		segs = append(segs, shm.Segment{FD: fd, Length: page})
	}
	r, err := shm.MapSegments(segs, 0, 2*page, unix.PROT_READ|unix.PROT_WRITE)
	if err != nil {
		t.Fatal(err)
	}
	mr, err := RegisterMR(pd, r, 0x7f0000000000, 2*page, abi.AccessLocalWrite|abi.AccessRemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Deregister()
	if sh, err := mr.ShareWith(q); err == nil {
		unix.Close(sh.FD)
		t.Fatal("a region of two memfds was shared as one")
	}
}
