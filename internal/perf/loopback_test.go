package perf

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/internal/daemontest"
)

// loopbackConfig makes two instances on a test daemon for the two ends.
func loopbackConfig(t *testing.T) Config {
	t.Helper()
	sock := daemontest.Start(t)
	adm, err := vrdma.DialAdmin(vrdma.Options{Socket: sock})
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	for _, n := range []string{"a", "b"} {
		if _, err := adm.CreateInstance(vrdma.InstanceSpec{Name: n, Adapters: 1}); err != nil {
			t.Fatal(err)
		}
	}
	return Config{MsgSize: 4096, Duration: 200 * time.Millisecond,
		A: vrdma.Options{Socket: sock, Instance: "a"}, B: vrdma.Options{Socket: sock, Instance: "b"}}
}

func TestLoopbackRunsEveryTestBothWays(t *testing.T) {
	cfg := loopbackConfig(t)
	type run struct {
		name    string
		threads int
	}
	var runs []run
	for _, n := range TestNames()[1:] {
		runs = append(runs, run{n, 0})
		if tests[n].lockstep != nil {
			runs = append(runs, run{n, 2}) // each end on its own pinned thread
		}
	}
	for _, r := range runs {
		c := cfg
		c.Tests, c.Threads = []string{r.name}, r.threads
		var got []Result
		if err := Run(context.Background(), c, func(res Result) error { got = append(got, res); return nil }); err != nil {
			t.Errorf("%s, threads %d: %v", r.name, r.threads, err)
			continue
		}
		if len(got) != 1 {
			t.Fatalf("%s: %d results, want 1", r.name, len(got))
		}
		res := got[0]
		bad := res.Test != r.name || res.Messages == 0 || res.MsgRate <= 0 || res.CPU <= 0 ||
			strings.HasSuffix(r.name, "_bw") && res.BW <= 0 || strings.HasSuffix(r.name, "_lat") && res.LatencyUS <= 0
		if bad {
			t.Errorf("%s, threads %d: %+v", r.name, r.threads, res)
		}
		if want := max(r.threads, 1); tests[r.name].lockstep != nil && res.Threads != want {
			t.Errorf("%s: threads %d reported, want %d", r.name, res.Threads, want)
		}
	}
}

func TestTimedStopsSoonAfterItsTimeWhenStepsAreSlow(t *testing.T) {
	n, took, err := timed(20*time.Millisecond, func(uint64) error { time.Sleep(5 * time.Millisecond); return nil })
	if err != nil {
		t.Fatal(err)
	}
	// Looking at the clock every 256 steps, as for fast steps, would take 256 of these.
	if n >= 100 || took < 20*time.Millisecond {
		t.Fatalf("timed ran %d steps in %v for 20ms of 5ms steps", n, took)
	}
}
