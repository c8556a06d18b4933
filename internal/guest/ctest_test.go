package guest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vrdma/vrdma/internal/daemontest"
	"github.com/vrdma/vrdma/internal/proto"
)

// The library's compiler flags (see the build) with -Werror, which only the
// project's tests add (a warning fails them, not a user's build), and what
// the C unit tests add: the sanitizers, which stop at the first error.
var (
	libFlags      = []string{"-std=c11", "-D_GNU_SOURCE", "-O2", "-g", "-fPIC", "-Wall", "-Wextra", "-Werror", "-fvisibility=hidden"}
	sanitizeFlags = []string{"-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-fno-sanitize-recover=all"}
	sanitizeEnv   = []string{"ASAN_OPTIONS=detect_leaks=1", "UBSAN_OPTIONS=print_stacktrace=1"}
)

// verbsHeader is the rdma-core header the library compiles against.
const verbsHeader = "/usr/include/infiniband/verbs.h"

// hangGuard bounds a C test program's run; they take well under a second.
const hangGuard = 5 * time.Minute

// TestCUnits builds every csrc/tests/*_test.c with the library's sources
// (ctest_build_test.go), twice: with the sanitizers, and plainly with the
// library's flags (so that -O2 warnings fail too); it runs both and fails
// with a program's output when it fails. A test whose opening comment says
// "needs: daemon" runs against a daemon of its own (internal/daemontest),
// whose socket it finds in VRDMA_SOCKET. The programs are built first, as
// many at a time as there are CPUs, and run one at a time: several at once,
// against daemons of this one (race-instrumented) process, starve the ones
// that count on progress, such as cq_resize_test's stream of completions
// under a resizing thread.
func TestCUnits(t *testing.T) {
	cc := requireToolchain(t)
	tests, err := filepath.Glob(filepath.Join("csrc", "tests", "*_test.c"))
	if err != nil {
		t.Fatal(err)
	}
	if len(tests) == 0 {
		t.Fatal("no C unit tests under csrc/tests")
	}
	builds := []struct {
		name  string
		flags []string
	}{
		{"sanitized", append(append([]string(nil), libFlags...), sanitizeFlags...)},
		{"plain", libFlags},
	}
	csrc, err := filepath.Abs("csrc")
	if err != nil {
		t.Fatal(err)
	}
	var flagSets [][]string
	for _, b := range builds {
		flagSets = append(flagSets, b.flags)
	}
	files := make([]string, len(tests))
	for i, test := range tests {
		files[i] = filepath.Base(test)
	}
	if f := flag.Lookup("test.run"); f == nil || !strings.Contains(f.Value.String(), "/") {
		// Every subtest runs (no -run pattern picks some): build them all
		// now. A failed build fails its subtest below.
		prebuildCPrograms(cc, csrc, flagSets, files)
	}
	for _, test := range tests {
		name := strings.TrimSuffix(filepath.Base(test), ".c")
		t.Run(name, func(t *testing.T) {
			for _, b := range builds {
				t.Run(b.name, func(t *testing.T) {
					spec, err := readTestSpec(test)
					if err != nil {
						t.Fatal(err)
					}
					bin := buildCTest(t, cc, b.flags, filepath.Base(test))
					ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
					defer cancel()
					cmd := exec.CommandContext(ctx, bin)
					cmd.Env = append(os.Environ(), sanitizeEnv...)
					if spec.daemon {
						// The default instance of a daemon of the test's own.
						cmd.Env = append(cmd.Env, "VRDMA_SOCKET="+daemontest.Start(t), "VRDMA_INSTANCE=", "XDG_RUNTIME_DIR="+runtimeDir(t))
					}
					out, err := cmd.CombinedOutput()
					if err != nil {
						t.Fatalf("%s: %v\n%s", name, err, out)
					}
					t.Logf("%s", out)
				})
			}
		})
	}
}

// TestChanAgainstGo runs the C channel (csrc/tests/chan_peer.c) against
// internal/proto's Go side, as the daemon speaks it: the real header
// encoding, encoding/json bodies, descriptors, events and errors.
func TestChanAgainstGo(t *testing.T) {
	cc := requireToolchain(t)
	bin := buildCTest(t, cc, append(append([]string(nil), libFlags...), sanitizeFlags...), "chan_peer.c")
	sock := filepath.Join(t.TempDir(), "vrdma.sock")
	l, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: sock, Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- serveChanPeer(l) }()

	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, sock)
	cmd.Env = append(os.Environ(), sanitizeEnv...)
	out, err := cmd.CombinedOutput()
	l.Close() // ends an accept still waiting, if the program never connected
	serr := <-served
	if err != nil {
		t.Fatalf("chan_peer: %v (the Go side: %v)\n%s", err, serr, out)
	}
	if serr != nil {
		t.Fatalf("the Go side: %v\nchan_peer's output:\n%s", serr, out)
	}
}

// serveChanPeer plays the Go side of chan_peer.c's script.
func serveChanPeer(l *net.UnixListener) error {
	c, err := l.AcceptUnix()
	if err != nil {
		return err
	}
	pc := proto.NewConn(c)
	defer pc.Close()

	h, body, fds, err := pc.Recv()
	proto.CloseFDs(fds)
	if err != nil {
		return fmt.Errorf("first request: %w", err)
	}
	if h.Kind != proto.KindRequest || h.Op != proto.OpQueryDevice || h.ID == 0 || string(body) != `{"port":1}` || len(fds) != 0 {
		return fmt.Errorf("first request: %+v %q with %d descriptors, want a query_device request {\"port\":1}", h, body, len(fds))
	}
	if err := pc.Send(proto.Header{Kind: proto.KindEvent, Op: proto.OpEvent}, proto.Event{Type: 1, Handle: 7, QPN: 3, Reason: "local work queue error"}); err != nil {
		return err
	}
	if err := pc.Send(proto.Header{Kind: proto.KindEvent, Op: proto.OpCMEvent}, proto.CMEvent{Type: proto.CMEventRequest}); err != nil {
		return err
	}
	memfd, err := unix.MemfdCreate("chan-peer", unix.MFD_CLOEXEC)
	if err != nil {
		return err
	}
	defer unix.Close(memfd)
	if _, err := unix.Write(memfd, []byte("vrdma")); err != nil {
		return err
	}
	gid := []byte{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 0xff}
	reply := struct {
		Name    string `json:"name"`
		GID     []byte `json:"gid"`
		None    []byte `json:"none"`
		MaxMR   uint64 `json:"max_mr_size"`
		Escaped string `json:"escaped"`
	}{"vrdma0", gid, nil, math.MaxUint64, "<a&b>\u2028\"\n\\"}
	if b, _ := json.Marshal(reply); !bytes.Contains(b, []byte(`\u003c`)) || !bytes.Contains(b, []byte(`"none":null`)) {
		return fmt.Errorf("encoding/json no longer writes what the test means to check: %s", b)
	}
	if err := pc.Send(proto.Header{Kind: proto.KindReply, Op: h.Op, ID: h.ID}, reply, memfd); err != nil {
		return err
	}

	h, body, fds, err = pc.Recv()
	proto.CloseFDs(fds)
	if err != nil {
		return fmt.Errorf("second request: %w", err)
	}
	var req struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(body, &req); err != nil || h.Op != proto.OpAllocPD || req.Name != "pd \"1\"\n" {
		return fmt.Errorf("second request: %+v %q (%v), want alloc_pd with an escaped name", h, body, err)
	}
	errBody := struct {
		Error string `json:"error"`
	}{"no PD named " + req.Name}
	if err := pc.Send(proto.Header{Kind: proto.KindReply, Op: h.Op, ID: h.ID, Code: proto.CodeNotFound}, errBody); err != nil {
		return err
	}

	h, _, fds, err = pc.Recv()
	proto.CloseFDs(fds)
	if err != nil || h.Op != proto.OpQueryPort {
		return fmt.Errorf("third request: %+v (%v), want query_port", h, err)
	}
	return nil // closing without a reply: the daemon is gone
}

// requireToolchain returns the C compiler, or skips the test when it or
// rdma-core's headers are missing.
func requireToolchain(t *testing.T) string {
	t.Helper()
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler (cc) to build the guest library's unit tests: install the Debian packages gcc and libibverbs-dev")
	}
	if _, err := os.Stat(verbsHeader); err != nil {
		t.Skipf("no %s to build the guest library's unit tests against: install the Debian packages gcc and libibverbs-dev", verbsHeader)
	}
	return cc
}

// buildCTest returns csrc/tests/<file> compiled with flags and linked
// with the library's sources compiled with the same flags, building it on
// the first call of the test binary with this file and these flags
// (cProgram).
func buildCTest(t *testing.T, cc string, flags []string, file string) string {
	t.Helper()
	csrc, err := filepath.Abs("csrc")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := readTestSpec(filepath.Join(csrc, "tests", file)); err != nil {
		t.Fatal(err)
	}
	bin, err := cProgram(cc, csrc, flags, file)
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// cTestSpec is what a C test's opening comment says about it.
type cTestSpec struct {
	daemon bool // "needs: daemon": it runs against a daemon
}

// readTestSpec reads a C test's "needs: daemon" line, if any (in its
// opening comment). A "sources:" line, which named the library files a
// test linked before the tests linked them all from an archive, is
// ignored.
func readTestSpec(path string) (cTestSpec, error) {
	var spec cTestSpec
	f, err := os.Open(path)
	if err != nil {
		return spec, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		line = strings.TrimSpace(strings.TrimPrefix(line, "*"))
		if rest, ok := strings.CutPrefix(line, "needs:"); ok {
			for _, need := range strings.Fields(rest) {
				if need != "daemon" {
					return spec, errors.New(path + ": the needs line names " + need + "; the only need a C test may have is daemon")
				}
				spec.daemon = true
			}
		}
		if line == "*/" || strings.HasSuffix(line, "*/") {
			break // the opening comment ends
		}
	}
	return spec, sc.Err()
}
