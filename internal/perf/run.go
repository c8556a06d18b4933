package perf

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/vrdma/vrdma"
)

// Config is a loopback perf run: both ends of each test in this process.
type Config struct {
	Tests    []string
	MsgSize  int           // 0: qperf's default of 64 KiB for bandwidth, 1 byte... see sizeFor
	Duration time.Duration // per test; default 2 s (qperf's default)
	A, B     vrdma.Options // the two ends' devices (vrdma0 of each instance)
	Async    bool          // recorded in results: the instances were created in async mode
	Trusted  bool          // recorded in results: the instances trust each other
	// Threads is how ping-pong tests drive the two ends: 1, one goroutine
	// plays both (each hop then crosses to the daemon's thread and back); 2,
	// each end spins on its own thread pinned to its own CPU, as qperf's and
	// UCX's two processes do. 0 picks per test (defaultThreads).
	Threads int
	// Random fills the regions with pseudo-random bytes, as perftest does;
	// otherwise they hold zeros.
	Random bool
}

// Validate checks the test names.
func (c *Config) Validate() error {
	for _, t := range c.Tests {
		if t == "conf" {
			continue
		}
		if _, ok := tests[t]; !ok {
			return unknownTest(t)
		}
	}
	return nil
}

func unknownTest(name string) error {
	return fmt.Errorf("unknown test %q: vrdma perf knows %s", name, strings.Join(TestNames(), ", "))
}

// defaultThreads: a ping-pong whose hops need no daemon thread (RDMA WRITE
// between trusting instances) runs its ends on two pinned cores, as qperf
// and UCX do; one whose hops go through the daemon runs both ends on one
// thread, because two spinning ends plus the daemon's thread are more
// threads than this project's 2-core machines have (docs/design/async-mode.md).
func defaultThreads(test string, trusted bool) int {
	if trusted && test == "rc_rdma_write_lat" {
		return 2
	}
	return 1
}

// sizeFor is qperf's default message size: 64 KiB for bandwidth tests,
// 1 byte for latency tests.
func sizeFor(test string, asked int) int {
	if asked > 0 {
		return asked
	}
	if strings.HasSuffix(test, "_bw") {
		return 64 << 10
	}
	return 1
}

// Run runs each test in loopback, both ends in this process, calling emit
// with each result as it is ready.
func Run(ctx context.Context, cfg Config, emit func(Result) error) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if cfg.Duration <= 0 {
		cfg.Duration = 2 * time.Second
	}

	for _, name := range cfg.Tests {
		if name == "conf" {
			continue
		}
		c := cfg
		c.MsgSize = sizeFor(name, cfg.MsgSize)
		if c.Threads == 0 {
			c.Threads = defaultThreads(name, cfg.Trusted)
		}
		t := tests[name]
		tctx, cancel := context.WithTimeout(ctx, c.Duration+30*time.Second)
		r, err := runLoopback(tctx, t, &c)
		cancel()
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		r.Test, r.Async, r.Trusted = name, cfg.Async, cfg.Trusted
		if t.lockstep != nil {
			r.Threads = c.Threads
		}
		if err := emit(r); err != nil {
			return err
		}
	}
	return nil
}
