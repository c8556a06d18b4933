package daemon

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/vrdma/vrdma/internal/proto"
	"golang.org/x/sys/unix"
)

// TestPinLedgerPerProcess: a process's regions share one count, bounded by
// the limit given; other processes have their own; the count goes with the
// process's last region, and never wraps.
func TestPinLedgerPerProcess(t *testing.T) {
	l := newPinLedger()
	a1, a2, b := l.join(100), l.join(100), l.join(200)
	if a1 != a2 || a1 == b {
		t.Fatal("sessions of one process do not share a count, or two processes do")
	}
	if _, ok := l.pin(a1, 48<<10, 64<<10); !ok {
		t.Fatal("48 KiB under 64 KiB refused")
	}
	if total, ok := l.pin(a2, 48<<10, 64<<10); ok || total != 96<<10 {
		t.Fatalf("a second session's 48 KiB: total %d, ok %v; want a refusal at 96 KiB", total, ok)
	}
	if _, ok := l.pin(b, 48<<10, 64<<10); !ok {
		t.Fatal("another process's 48 KiB refused")
	}
	if _, ok := l.pin(a2, Unlimited, Unlimited); ok {
		t.Fatal("a charge that wraps the count passed")
	}
	l.unpin(a1, 1<<30) // more than held: stops at zero
	if got := l.pinned(a2); got != 0 {
		t.Fatalf("after giving everything back: %d", got)
	}
	l.leave(a1)
	if l.procs[100] == nil {
		t.Fatal("the count went with the first of two sessions")
	}
	l.leave(a2)
	l.leave(b)
	if len(l.procs) != 0 {
		t.Fatalf("counts outlive their sessions: %v", l.procs)
	}
}

// TestParseMemlock: the soft limit of a /proc/PID/limits file, "unlimited"
// as Unlimited, and an error, not a guess, for a file without a readable
// line.
func TestParseMemlock(t *testing.T) {
	const head = "Limit                     Soft Limit           Hard Limit           Units     \n"
	for _, tc := range []struct {
		name, file string
		want       uint64
		err        string
	}{
		{"bytes", head + "Max locked memory         8388608              8388608              bytes     \n", 8 << 20, ""},
		{"unlimited", head + "Max locked memory         unlimited            unlimited            bytes     \n", Unlimited, ""},
		{"no line", head + "Max open files            1024                 524288               files     \n", 0, "no \"Max locked memory\" line"},
		{"garbled", head + "Max locked memory         lots                 lots                 bytes     \n", 0, "cannot read"},
		{"empty line", head + "Max locked memory\n", 0, "cannot read"},
		{"empty", "", 0, "no \"Max locked memory\" line"},
	} {
		got, err := parseMemlock([]byte(tc.file), "/proc/7/limits")
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %d, %v; want an error with %q", tc.name, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: %d, %v; want %d", tc.name, got, err, tc.want)
		}
	}
}

// senderConn returns the daemon's end of a connection whose last message
// came from this process (its credentials passed), or from nobody the
// daemon can name (pass false).
func senderConn(t *testing.T, pass bool) *proto.Conn {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET, 0)
	if err != nil {
		t.Fatal(err)
	}
	var conns [2]*net.UnixConn
	for i, fd := range fds {
		c, err := net.FileConn(os.NewFile(uintptr(fd), "pair"))
		if err != nil {
			t.Fatal(err)
		}
		conns[i] = c.(*net.UnixConn)
		t.Cleanup(func() { c.Close() })
	}
	if pass {
		if err := proto.PassCredentials(conns[0]); err != nil {
			t.Fatal(err)
		}
	}
	daemonEnd, client := proto.NewConn(conns[0]), proto.NewClientConn(conns[1])
	if err := client.Send(proto.Header{Kind: proto.KindRequest, Op: proto.OpRegMR}, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := daemonEnd.Recv(); err != nil {
		t.Fatal(err)
	}
	return daemonEnd
}

// TestPinChargesTheSender: a registration is charged to the process that
// sent it, against that process's own RLIMIT_MEMLOCK; one from a process
// whose limit cannot be read, or that the daemon cannot name, is refused
// with an error that says why; root sessions are not limited.
func TestPinChargesTheSender(t *testing.T) {
	me := int32(os.Getpid())
	for _, tc := range []struct {
		name    string
		uid     uint32
		pass    bool // the connection passes credentials
		limit   uint64
		readErr error
		n       uint64
		err     string // "" = pinned
	}{
		{"within the limit", 1000, true, 8 << 20, nil, 4 << 20, ""},
		{"past the limit", 1000, true, 8 << 20, nil, 64 << 20, "above its RLIMIT_MEMLOCK of 8388608 bytes"},
		{"unlimited", 1000, true, Unlimited, nil, 64 << 20, ""},
		{"limits unreadable", 1000, true, 0, errors.New("cannot read the RLIMIT_MEMLOCK of process 7"), 4096, "cannot read the RLIMIT_MEMLOCK"},
		{"sender unknown", 1000, false, 8 << 20, nil, 4096, "cannot tell which process sent this registration"},
		{"root", 0, false, 0, errors.New("not asked"), 64 << 20, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := memlockOf
			t.Cleanup(func() { memlockOf = old })
			memlockOf = func(pid int32) (uint64, error) {
				if pid != me {
					return memlockLimit(pid) // the pid the daemon could not name
				}
				return tc.limit, tc.readErr
			}
			s := &session{d: &Daemon{pins: newPinLedger()}, conn: senderConn(t, tc.pass), cred: creds{uid: tc.uid, pid: me + 1, known: true}}
			p, err := s.pin(tc.n)
			if tc.err != "" {
				var pe *proto.Error
				if !errors.As(err, &pe) || pe.Code != proto.CodeMemlock || !strings.Contains(pe.Message, tc.err) {
					t.Fatalf("pin %d: %v; want a memlock refusal with %q", tc.n, err, tc.err)
				}
				if s.pinned != 0 || len(s.d.pins.procs) != 0 {
					t.Fatalf("a refusal left %d bytes counted, processes %v", s.pinned, s.d.pins.procs)
				}
				return
			}
			if err != nil {
				t.Fatalf("pin %d: %v", tc.n, err)
			}
			if tc.uid != 0 && (p == nil || p.pid != me) {
				t.Fatalf("charged to %+v, want the sender, pid %d (the session's connecting pid is %d)", p, me, me+1)
			}
			s.unpin(p, tc.n)
			if s.pinned != 0 || len(s.d.pins.procs) != 0 {
				t.Fatalf("after unpin: %d bytes, processes %v", s.pinned, s.d.pins.procs)
			}
		})
	}
}

// TestMemlockLimitIsCurrent: the limit the daemon charges against is the
// one /proc/PID/limits shows, as it is at each call: a prlimit between two
// registrations counts at the second.
func TestMemlockLimitIsCurrent(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skipf("no sleep to start: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	pid := int32(cmd.Process.Pid)
	var hard unix.Rlimit
	if err := unix.Prlimit(int(pid), unix.RLIMIT_MEMLOCK, nil, &hard); err != nil {
		t.Skipf("prlimit: %v", err)
	}
	for _, tc := range []struct {
		name string
		soft uint64
		want uint64
	}{
		{"64 KiB", 64 << 10, 64 << 10},
		{"8 MiB", 8 << 20, 8 << 20},
		{"lowered again", 4 << 10, 4 << 10},
		{"unlimited", unix.RLIM_INFINITY, Unlimited},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.soft > hard.Max {
				t.Skipf("the hard limit %d is below %d", hard.Max, tc.soft)
			}
			if err := unix.Prlimit(int(pid), unix.RLIMIT_MEMLOCK, &unix.Rlimit{Cur: tc.soft, Max: hard.Max}, nil); err != nil {
				t.Fatalf("prlimit: %v", err)
			}
			got, err := memlockLimit(pid)
			if err != nil || got != tc.want {
				t.Fatalf("memlockLimit = %d, %v; want %d", got, err, tc.want)
			}
			fromProc, err := memlockFromProc(pid)
			if err != nil || fromProc != got {
				t.Fatalf("/proc/%d/limits says %d (%v), memlockLimit %d", pid, fromProc, err, got)
			}
		})
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if _, err := memlockLimit(pid); err == nil {
		t.Fatalf("memlockLimit of exited process %d: no error", pid)
	}
}

// BenchmarkMemlockLimit: what reading a sender's limit costs per
// registration.
func BenchmarkMemlockLimit(b *testing.B) {
	pid := int32(os.Getpid())
	b.Run("prlimit", func(b *testing.B) {
		for range b.N {
			if _, err := memlockLimit(pid); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("proc", func(b *testing.B) {
		for range b.N {
			if _, err := memlockFromProc(pid); err != nil {
				b.Fatal(err)
			}
		}
	})
}
