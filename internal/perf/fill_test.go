package perf

import (
	"context"
	"testing"

	"github.com/vrdma/vrdma/ibv"
)

// TestFillRandomLeavesNoZeroWords: perftest's buffers hold random bytes,
// so --random must not leave zeros anywhere (a zero tail or a region left
// as it was would run the copy at its zero-page speed again).
func TestFillRandomLeavesNoZeroWords(t *testing.T) {
	for _, n := range []int{0, 1, 7, 8, 9, 4096, 2<<20 + 128} {
		b := make([]byte, n)
		fillRandom(b)
		for i := 0; i+8 <= n; i += 8 {
			if w := b[i : i+8]; w[0]|w[1]|w[2]|w[3]|w[4]|w[5]|w[6]|w[7] == 0 {
				t.Fatalf("len %d: the word at %d is zero", n, i)
			}
		}
		if n%8 != 0 && n > 8 {
			tail := b[n-n%8:]
			zero := true
			for _, c := range tail {
				zero = zero && c == 0
			}
			if zero {
				t.Fatalf("len %d: the tail of %d bytes is zero", n, n%8)
			}
		}
	}
}

// TestRandomRegionsAreFilled: with Config.Random both ends' regions hold
// the pseudo-random bytes before the test runs, and the run still works.
func TestRandomRegionsAreFilled(t *testing.T) {
	cfg := loopbackConfig(t)
	cfg.Random = true
	a, b, err := pair(&cfg, ibv.RC, cfg.MsgSize)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]byte, regionSize(cfg.MsgSize))
	fillRandom(want)
	for name, s := range map[string]*side{"a": a, "b": b} {
		if got := s.mr.Bytes(); string(got) != string(want) {
			t.Errorf("end %s: the region does not hold the pseudo-random bytes", name)
		}
	}
	a.close()
	b.close()
	cfg.Tests = []string{"rc_rdma_write_bw"}
	var got []Result
	if err := Run(context.Background(), cfg, func(r Result) error { got = append(got, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Messages == 0 {
		t.Fatalf("results %+v: want one with messages", got)
	}
}
