package verbs

import (
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// Environment of TestRegMROnDevice: the helper to run and the device to
// open. The interop test sets them when it runs this test binary inside a
// guest with rdma_rxe (internal/interop, TestVerbsRegMRInGuest).
const (
	testHelperEnv = "VRDMA_VERBS_TEST_HELPER"
	testDevEnv    = "VRDMA_VERBS_TEST_DEV"
)

// TestRegMROnDevice registers a memfd region with a real device through the
// helper: the helper maps the memfd the daemon passes and ibv_reg_mr's its
// mapping; the kernel then lists the region (`rdma resource show mr`) with
// the keys and length the helper reported. Bad offsets and access flags
// are refused with rdma-core's errno, and deregistering twice is an error.
func TestRegMROnDevice(t *testing.T) {
	d, _ := openTestDevice(t)

	const size = 3 * 4096
	fd, err := unix.MemfdCreate("vrdma-test-mr", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Ftruncate(fd, size); err != nil {
		t.Fatal(err)
	}
	mr, err := d.RegMR(fd, 4096, 2*4096, AccessLocalWrite|AccessRemoteWrite|AccessRemoteRead, 0x7f0000001000)
	if err != nil {
		t.Fatalf("RegMR: %v", err)
	}
	t.Logf("registered: %+v", mr)
	if mr.LKey == 0 && mr.RKey == 0 {
		t.Errorf("RegMR gave no keys: %+v", mr)
	}
	if out, err := exec.Command("rdma", "resource", "show", "mr").CombinedOutput(); errors.Is(err, exec.ErrNotFound) {
		t.Logf("no rdma tool (iproute2) to see the region from the kernel's side")
	} else if err != nil {
		t.Errorf("rdma resource show mr: %v\n%s", err, out)
	} else {
		want := []string{fmt.Sprintf("rkey 0x%x", mr.RKey), fmt.Sprintf("lkey 0x%x", mr.LKey), "mrlen 8192"}
		for _, w := range want {
			if !strings.Contains(string(out), w) {
				t.Errorf("rdma resource show mr lacks %q:\n%s", w, out)
			}
		}
	}
	for _, bad := range []struct {
		name           string
		offset, length uint64
		access         uint32
		iova           uint64
	}{
		{"unaligned offset", 100, 4096, AccessLocalWrite, 0},
		{"zero length", 0, 0, AccessLocalWrite, 0},
		{"unknown access", 0, 4096, 1 << 20, 0},
		{"wrapping iova", 0, 4096, AccessLocalWrite, ^uint64(0) - 100},
	} {
		if _, err := d.RegMR(fd, bad.offset, bad.length, bad.access, bad.iova); !errors.Is(err, ErrDevice) {
			t.Errorf("%s: RegMR = %v, want ErrDevice", bad.name, err)
		}
	}
	if _, err := d.h.Call(AppendRegMR(nil, 0, 0, 4096, AccessLocalWrite, 0)); !errors.Is(err, ErrDevice) || !strings.Contains(err.Error(), "no memfd") {
		t.Errorf("RegMR without a memfd: %v, want ErrDevice saying so", err)
	}
	if err := d.DeregMR(mr); err != nil {
		t.Fatalf("DeregMR: %v", err)
	}
	if err := d.DeregMR(mr); !errors.Is(err, ErrDevice) {
		t.Errorf("DeregMR twice: %v, want ErrDevice (no such region)", err)
	}
}
