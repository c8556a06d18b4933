package verbsbuild

import (
	"errors"
	"strings"
	"testing"

	"github.com/vrdma/vrdma/internal/verbs"
)

// realHelper builds the helper from the embedded sources, or skips.
func realHelper(t testing.TB) string {
	t.Helper()
	t.Setenv("VRDMA_GUEST_CACHE", t.TempDir())
	p, err := verbs.HelperPath("", Build)
	if err != nil {
		t.Skipf("cannot build the helper here: %v", err)
	}
	return p
}

// TestRealHelper builds and runs the helper: on a host without the device
// asked for, opening it is verbs.ErrNoDevice with what rdma-core has, and the
// helper stays usable.
func TestRealHelper(t *testing.T) {
	h, err := verbs.StartHelper(realHelper(t))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if _, err := verbs.OpenDevice(h, "vrdma-no-such-dev", 1); !errors.Is(err, verbs.ErrNoDevice) || !strings.Contains(err.Error(), "ibv_devices") {
		t.Fatalf("verbs.OpenDevice = %v, want verbs.ErrNoDevice", err)
	}
	if _, err := verbs.OpenDevice(h, "bad/name", 1); !errors.Is(err, verbs.ErrNoDevice) {
		t.Fatalf("verbs.OpenDevice(bad/name) = %v, want verbs.ErrNoDevice", err)
	}
	if _, err := h.Call(verbs.AppendHeader(nil, verbs.OpPing, 0, 0, 0)); err != nil {
		t.Fatalf("ping after the failed opens: %v", err)
	}
	if _, err := h.Call(verbs.AppendHeader(nil, 99, 0, 0, 0)); !errors.Is(err, verbs.ErrDevice) {
		t.Fatalf("unknown op: %v, want verbs.ErrDevice (EOPNOTSUPP)", err)
	}
}

// BenchmarkHelperRoundTrip is the relay's floor: one empty request and
// reply between the daemon and the helper over their SOCK_SEQPACKET socket.
func BenchmarkHelperRoundTrip(b *testing.B) {
	h, err := verbs.StartHelper(realHelper(b))
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	req := verbs.AppendHeader(nil, verbs.OpPing, 0, 0, 0)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := h.Call(req); err != nil {
			b.Fatal(err)
		}
	}
}

// TestHelperPathWithoutCompiler: a host without a compiler gets verbs.ErrBuild
// saying what to install, and how to do without.
func TestHelperPathWithoutCompiler(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv(verbs.HelperEnv, "")
	t.Setenv("VRDMA_GUEST_CACHE", t.TempDir())
	_, err := verbs.HelperPath("", Build)
	if !errors.Is(err, verbs.ErrBuild) || !strings.Contains(err.Error(), "apt-get install gcc") || !strings.Contains(err.Error(), verbs.HelperEnv) {
		t.Fatalf("HelperPath without cc = %v, want verbs.ErrBuild naming gcc and %s", err, verbs.HelperEnv)
	}
}
