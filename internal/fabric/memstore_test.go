package fabric

import (
	"testing"
	"time"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestMemStore(t *testing.T) {
	runStoreSuite(t, func(t *testing.T) storeEnv {
		clk := NewFakeClock(epoch)
		m := NewMemStore(clk)
		t.Cleanup(func() { m.Close() })
		return storeEnv{st: m, other: func(*testing.T) Store { return m }, advance: clk.Advance, clock: clk, fake: clk}
	})
}

func TestFakeClockOrder(t *testing.T) {
	clk := NewFakeClock(epoch)
	var got []int
	var at []time.Duration
	for _, d := range []int{3, 1, 2, 1} {
		clk.AfterFunc(time.Duration(d)*time.Second, func() {
			got = append(got, d)
			at = append(at, clk.Now().Sub(epoch))
		})
	}
	stopped := clk.AfterFunc(time.Second, func() { t.Error("stopped timer ran") })
	if !stopped.Stop() || stopped.Stop() {
		t.Fatal("Stop: want true then false")
	}
	clk.Advance(1500 * time.Millisecond)
	if len(got) != 2 || clk.Pending() != 2 {
		t.Fatalf("after 1.5 s: ran %v, %d pending", got, clk.Pending())
	}
	clk.Advance(10 * time.Second)
	want := []int{1, 1, 2, 3}
	for i := range want {
		if got[i] != want[i] || at[i] != time.Duration(want[i])*time.Second {
			t.Fatalf("ran %v at %v, want %v at their deadlines", got, at, want)
		}
	}
	if clk.Now().Sub(epoch) != 11500*time.Millisecond {
		t.Fatalf("now = %v", clk.Now().Sub(epoch))
	}
}
