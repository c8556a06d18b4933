package interop

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The guest tests share their guests: booting a TCG guest is the most
// expensive step of most of them, and nearly all need guest A as it comes
// up (rxe0 on eth0, nothing running). sharedGuests boots the guests a test
// asks for on first use, into one namespace for the whole test binary;
// each test has them to itself until it ends, when its cleanup puts them
// back as they came up (tidy) for the next one. A test that fails retires
// them (the next one boots new guests), so one failure cannot spill into
// the tests after it, and TestMain stops them at the end (stopShared).
var shared struct {
	mu sync.Mutex // held by the test using the guests, from sharedGuests to its cleanup
	g  *Guests    // nil: none booted, or retired
	// base is, for each guest, the processes it runs when idle (tidy ends
	// every other one): PIDs, space-separated, space-enclosed.
	base map[string]string
}

// sharedGuests returns the shared guests with names ("A" if none) up,
// booting those not up yet. The test holds them until it ends (subtests
// share their parent's; a test running in parallel waits); its cleanup
// logs their consoles if it failed, as Up's does.
func sharedGuests(t *testing.T, names ...string) *Guests {
	t.Helper()
	Require(t)
	if len(names) == 0 {
		names = []string{"A"}
	}
	shared.mu.Lock()
	locked := true
	defer func() {
		if locked { // sharedGuests failed the test
			if t.Failed() {
				retireShared(t)
			}
			shared.mu.Unlock()
		}
	}()
	if shared.g == nil {
		g, err := newGuests(t)
		if err != nil {
			t.Fatal(err)
		}
		shared.g, shared.base = g, map[string]string{}
	}
	g := shared.g
	var boot []string
	for _, n := range names {
		if !slices.Contains(g.names, n) {
			boot = append(boot, n)
		}
	}
	if len(boot) > 0 {
		g.boot(t, boot...)
		for _, n := range boot {
			out, err := g.guestScript(n, 60, strayFunc("")+"\nstray")
			if err != nil {
				t.Fatalf("interop: listing guest %s's processes after its boot: %v\n%s", n, err, out)
			}
			shared.base[n] = pidSet(out)
		}
	} else {
		t.Logf("guests %v: the shared ones, up since their boot (namespace %s)", names, g.ns)
	}
	locked = false
	t.Cleanup(func() {
		defer shared.mu.Unlock()
		if t.Failed() {
			g.logConsoles(t)
			retireShared(t)
			return
		}
		for _, n := range names {
			if err := g.tidy(t, n); err != nil {
				t.Logf("interop: guest %s cannot be put back as it came up, so the next test boots new guests: %v", n, err)
				retireShared(t)
				return
			}
		}
	})
	return g
}

// retireShared stops the shared guests; the next sharedGuests boots new
// ones.
func retireShared(t testing.TB) {
	if shared.g == nil {
		return
	}
	if err := shared.g.down(); err != nil {
		t.Error(err)
	}
	shared.g = nil
}

// stopShared stops the shared guests at the end of the test binary
// (TestMain).
func stopShared() error {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.g == nil {
		return nil
	}
	err := shared.g.down()
	shared.g = nil
	return err
}

// tidy puts guest name back as it came up after a test: it ends the
// processes the test left running, empties /tmp (the guest daemon's
// socket, state and log), adds rxe0 again if the test deleted it and waits
// until it is active with its IPv4 GID, and removes the finished commands'
// files from the share (the guest's command agent looks through them all
// ten times a second).
func (g *Guests) tidy(t *testing.T, name string) error {
	script := strayFunc(shared.base[name]) + `
i=0
while s=$(stray); [ -n "$s" ]; do
	i=$((i+1)); [ $i -gt 50 ] && { echo "still running:"; echo "$s"; exit 6; }
	echo "$s" | while read -r pid rest; do echo "left running: $pid $rest"; kill -9 "$pid" 2>/dev/null; done
	sleep 0.1 # the children of those killed go to init
done
rm -rf /tmp/* /tmp/.[!.]* 2>/dev/null
if ! rdma link show rxe0/1 >/dev/null 2>&1; then
	echo "rxe0 is gone: adding it again"
	rdma link add rxe0 type rxe netdev eth0 || exit 3
	i=0; until ibv_devinfo -v -d rxe0 2>/dev/null | grep -q '::ffff:` + GuestIP(name).String() + `'; do i=$((i+1)); [ $i -gt 300 ] && { echo "rxe0 has no IPv4 GID"; exit 4; }; sleep 0.1; done
fi
rdma link show rxe0/1 | grep -q 'state ACTIVE' || { rdma link show; exit 5; }`
	out, err := g.guestScript(name, 90, script)
	if out = strings.TrimSpace(out); out != "" {
		t.Logf("interop: tidying guest %s after the test:\n%s", name, out)
	}
	if err != nil {
		return fmt.Errorf("%v: %s", err, out)
	}
	return g.removeFinished(name)
}

// guestScript runs the shell script in guest name, bounded by secs
// seconds, outside any test's context (a cleanup's runs after it ended).
func (g *Guests) guestScript(name string, secs int, script string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(secs+30)*time.Second)
	defer cancel()
	return g.script(ctx, "exec", name, fmt.Sprint(secs), script)
}

// strayFunc is a guest shell function, stray, listing one "PID command
// line" a line the processes running in the guest other than kernel
// threads, those whose PIDs are in base (" 1 57 ... "), the command
// agent's poll (sleep 0.1, init's child), busybox timeout's watchers (left
// to init; each ends once its command has) and the command calling it
// (its ancestors and their children: the agent's subshell, stray's own
// subshell). It reads /proc with the shell's builtins: a fork costs much
// in a TCG guest.
func strayFunc(base string) string {
	return `stray() {
	chain=" "; p=$$
	while [ "$p" -gt 1 ] && read -r s </proc/$p/stat; do chain="$chain$p "; s=${s##*) }; set -- $s; p=$2; done
	for d in /proc/[0-9]*; do
		pid=${d#/proc/}
		case "$chain` + base + ` " in *" $pid "*) continue ;; esac
		read -r s 2>/dev/null <$d/stat || continue
		comm=${s#*\(}; comm=${comm%\)*}; s=${s##*) }; set -- $s
		case "$chain" in *" $2 "*) continue ;; esac
		[ "$comm" = timeout ] && continue
		read -r c 2>/dev/null <$d/cmdline
		[ -n "$c" ] || continue # a kernel thread
		[ "$comm" = sleep ] && [ "$2" = 1 ] && [ "$(tr '\0' ' ' <$d/cmdline)" = "sleep 0.1 " ] && continue
		echo "$pid $(tr '\0' ' ' <$d/cmdline)"
	done
}`
}

// pidSet turns stray's output into a set of PIDs for base.
func pidSet(out string) string {
	set := " "
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			set += f[0] + " "
		}
	}
	return set
}

// removeFinished removes the files of guest name's finished commands from
// its share, the wrapper (what the agent looks for) first.
func (g *Guests) removeFinished(name string) error {
	dir := filepath.Join(g.share(name), "cmd")
	rcs, err := filepath.Glob(filepath.Join(dir, "*.rc"))
	if err != nil {
		return err
	}
	for _, rc := range rcs {
		id := strings.TrimSuffix(rc, ".rc")
		for _, ext := range []string{".sh", ".cmd", ".out", ".pid", ".rc"} {
			if err := os.Remove(id + ext); err != nil && !os.IsNotExist(err) {
				return err
			}
		}
	}
	return nil
}
