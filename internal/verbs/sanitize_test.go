package verbs

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestHelperUnderSanitizers builds the helper with -Werror under ASan and
// UBSan and drives it through everything it does on a host without the
// device (open errors, unknown ops, pings, the end of its socket): it must
// answer all and exit without a report (leaks included).
func TestHelperUnderSanitizers(t *testing.T) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler")
	}
	dir := t.TempDir()
	src, err := os.ReadFile(filepath.Join("csrc", "helper.c"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "helper.c"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, HelperName)
	out, err := exec.Command(cc, "-std=c11", "-D_GNU_SOURCE", "-O1", "-g", "-Wall", "-Wextra", "-Werror",
		"-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-fno-sanitize-recover=all",
		"-o", exe, filepath.Join(dir, "helper.c"), "-libverbs").CombinedOutput()
	if err != nil {
		t.Skipf("cannot build the helper with sanitizers here (%v): %s", err, out)
	}
	h, err := StartHelper(exe)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := OpenDevice(h, "vrdma-no-such-dev", 1); !errors.Is(err, ErrNoDevice) {
		t.Errorf("OpenDevice: %v, want ErrNoDevice", err)
	}
	if _, err := h.Call(AppendHeader(nil, OpQueryPort, 0, 0, 0)); !errors.Is(err, ErrNoDevice) {
		t.Errorf("query before open: %v, want ErrNoDevice", err)
	}
	bad := AppendHeader(nil, OpOpen, 0, 0, 8+2)
	bad = append(ne.AppendUint32(ne.AppendUint32(bad, 1), 99), "ab"...) // name length beyond the body
	if _, err := h.Call(bad); !errors.Is(err, ErrDevice) {
		t.Errorf("open with a bad name length: %v, want ErrDevice (EINVAL)", err)
	}
	// A region's memfd is closed by the helper even when it refuses.
	fd, err := unix.MemfdCreate("vrdma-test", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if _, err := h.CallFD(AppendRegMR(nil, 0, 0, 4096, AccessLocalWrite, 0), fd); !errors.Is(err, ErrNoDevice) {
		t.Errorf("reg_mr before open: %v, want ErrNoDevice", err)
	}
	if _, err := h.CallFD(AppendHeader(nil, OpPing, 0, 0, 0), fd); err != nil {
		t.Errorf("a ping with a descriptor it does not want: %v", err)
	}
	for _, op := range []Op{OpPing, 77} {
		h.Call(AppendHeader(nil, op, 0, 0, 0))
	}
	if _, err := h.Call(AppendHeader(nil, OpPing, 0, 0, 0)); err != nil {
		t.Errorf("ping: %v", err)
	}
	h.Close()
	if st := h.cmd.ProcessState; st == nil || st.ExitCode() != 0 {
		t.Errorf("the helper exited with %v", st)
	}
	if s := h.stderr.String(); strings.TrimSpace(s) != "" {
		t.Errorf("the helper reported:\n%s", s)
	}
}
