package attack

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/vrdma/vrdma/internal/proto"
	"golang.org/x/sys/unix"
)

// A registration's segment list (proto.RegMRReq.Segments, the guest
// library's registrations over pages moved for earlier ones) is the
// client's word about memfds it passes: it may lie about their sizes and
// seals, pass descriptors that are no memfds, more or fewer of them than
// it lists, or declare a terabyte of sparse memfds. Each lie is refused
// before the daemon maps anything that could fault, or locks what the
// tenant may not (the terabyte against its RLIMIT_MEMLOCK, before
// mapping); the daemon keeps serving it and other tenants.

// lyingSegmentsCases are the lies the role "lying-segments" tells, by
// name, with what the refusal must say.
var lyingSegmentsCases = []struct {
	name, code, says string // code: proto.Code.String()
}{
	{"past the end", proto.CodeInvalid.String(), "holds"},
	{"terabyte", proto.CodeMemlock.String(), "RLIMIT_MEMLOCK"},
	{"unsealed", proto.CodeInvalid.String(), "sealed"},
	{"a pipe", proto.CodeInvalid.String(), "sealed"},
	{"descriptors too many", proto.CodeInvalid.String(), "descriptors"},
	{"descriptors too few", proto.CodeInvalid.String(), "descriptors"},
	{"offset beyond 64 bits", proto.CodeInvalid.String(), "overflows"},
}

// lyingSegments is the role: one registration per lie on one connection,
// then an honest one.
func lyingSegments() int {
	c, pd, err := rawOpen(os.Getenv("VRDMA_SOCKET"))
	if err != nil {
		fmt.Println("open:", err)
		return 1
	}
	defer c.Close()
	page := uint64(os.Getpagesize())
	mk := func(size uint64, seal bool) int {
		fd, err := unix.MemfdCreate("attack", unix.MFD_ALLOW_SEALING|unix.MFD_CLOEXEC)
		if err != nil {
			return -1
		}
		_ = unix.Ftruncate(fd, int64(size))
		if seal {
			_, _ = unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW)
		}
		return fd
	}
	var p [2]int
	_ = unix.Pipe2(p[:], unix.O_CLOEXEC)
	seg := func(off, n uint64) proto.MRSegment { return proto.MRSegment{Offset: off, Length: n} }
	sixteen := make([]proto.MRSegment, proto.MaxMRSegments)
	var sparse []int
	for i := range sixteen {
		sixteen[i] = seg(0, 64<<30)
		sparse = append(sparse, mk(64<<30, true))
	}
	lies := map[string]struct {
		segs   []proto.MRSegment
		fds    []int
		length uint64
	}{
		"past the end":          {[]proto.MRSegment{seg(0, 2*page)}, []int{mk(page, true)}, 2 * page},
		"terabyte":              {sixteen, sparse, 1 << 40},
		"unsealed":              {[]proto.MRSegment{seg(0, page)}, []int{mk(page, false)}, page},
		"a pipe":                {[]proto.MRSegment{seg(0, page)}, []int{p[0]}, page},
		"descriptors too many":  {[]proto.MRSegment{seg(0, page)}, []int{mk(page, true), mk(page, true), mk(page, true)}, page},
		"descriptors too few":   {[]proto.MRSegment{seg(0, page), seg(0, page)}, []int{mk(page, true)}, 2 * page},
		"offset beyond 64 bits": {[]proto.MRSegment{seg(-page, page), seg(0, page)}, []int{mk(page, true), mk(page, true)}, 2 * page},
	}
	for _, lc := range lyingSegmentsCases {
		l := lies[lc.name]
		req := proto.RegMRReq{PD: pd, Addr: 0x10000, Length: l.length, Access: 1, Segments: l.segs}
		code, body, err := rawCall(c, proto.OpRegMR, req, l.fds...)
		if err != nil {
			fmt.Printf("%s: connection: %v\n", lc.name, err)
			return 1
		}
		var e struct {
			Error string `json:"error"`
		}
		_ = json.Unmarshal(body, &e)
		sayReg(lc.name, code, e.Error)
	}
	code, msg := regMR(c, pd, 1<<20)
	sayReg("honest", code, msg)
	return 0
}

// TestLyingSegments: a tenant sends registrations whose segment lists lie;
// each is refused with what is wrong (or the locked-memory limit, before
// mapping a terabyte of sparse memfds), its honest registration after them
// works, and so does another tenant's.
func TestLyingSegments(t *testing.T) {
	sock := soloDaemon(t, false)
	out := accountRun(t, tenantA, sock, "lying-segments")
	for _, lc := range lyingSegmentsCases {
		got := out[lc.name]
		if !strings.HasPrefix(got, lc.code+": ") || !strings.Contains(got, lc.says) {
			t.Errorf("%s: %q, want %s saying %q", lc.name, got, lc.code, lc.says)
		}
	}
	if got := out["honest"]; got != "ok" {
		t.Errorf("an honest registration after the lies: %q, want ok", got)
	}
	if got := accountRun(t, tenantB, sock, "register")["register 1M"]; got != "ok" {
		t.Errorf("another tenant's registration: %q, want ok", got)
	}
}
