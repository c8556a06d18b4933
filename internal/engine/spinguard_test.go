package engine

import (
	"testing"
	"time"
)

func TestSpinGuard(t *testing.T) {
	ms := int64(time.Millisecond)
	type step struct {
		wall, cpu int64 // in ms
		restart   bool
		wantSpin  bool // maySpin(wall) after the step
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"a poller with a core to itself spins", []step{
			{wall: 1, cpu: 1, wantSpin: true},
			{wall: 30, cpu: 28, wantSpin: true},
			{wall: 60, cpu: 58, wantSpin: true},
		}},
		{"a starved poller sleeps for the first backoff", []step{
			{wall: 1, cpu: 1, wantSpin: true},
			{wall: 31, cpu: 11, wantSpin: false},  // 10 of 30 ms: starved
			{wall: 280, cpu: 11, wantSpin: false}, // until 31 + 250
			{wall: 281, cpu: 11, wantSpin: true},
		}},
		{"a window shorter than spinWindow is not judged", []step{
			{wall: 1, cpu: 1, wantSpin: true},
			{wall: 10, cpu: 1, wantSpin: true},
		}},
		{"backoff doubles while the CPU stays contended", []step{
			{wall: 1, cpu: 0, wantSpin: true},
			{wall: 21, cpu: 1, wantSpin: false}, // backoff 250: until 271
			{wall: 271, cpu: 1, wantSpin: true},
			{wall: 272, cpu: 1, wantSpin: true},  // new window
			{wall: 292, cpu: 2, wantSpin: false}, // backoff 500: until 792
			{wall: 791, cpu: 2, wantSpin: false},
			{wall: 792, cpu: 2, wantSpin: true},
		}},
		{"a good window resets the backoff", []step{
			{wall: 1, cpu: 0, wantSpin: true},
			{wall: 21, cpu: 1, wantSpin: false}, // 250
			{wall: 271, cpu: 1, wantSpin: true},
			{wall: 272, cpu: 1, wantSpin: true},
			{wall: 300, cpu: 29, wantSpin: true},  // fine: backoff 0
			{wall: 320, cpu: 30, wantSpin: false}, // starved again: 250, not 500
			{wall: 569, cpu: 30, wantSpin: false},
			{wall: 570, cpu: 30, wantSpin: true},
		}},
		{"time asleep is not time starved", []step{
			{wall: 1, cpu: 1, wantSpin: true},
			{wall: 2, restart: true, wantSpin: true},
			{wall: 100, cpu: 2, wantSpin: true}, // a fresh window starts here
			{wall: 121, cpu: 22, wantSpin: true},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var g spinGuard
			for i, s := range tt.steps {
				if s.restart {
					g.restart()
				} else {
					g.observe(s.wall*ms, s.cpu*ms)
				}
				if got := g.maySpin(s.wall * ms); got != s.wantSpin {
					t.Fatalf("step %d (wall %d ms, cpu %d ms): maySpin = %v, want %v (guard %+v)", i, s.wall, s.cpu, got, s.wantSpin, g)
				}
			}
		})
	}
}

func TestTimerSooner(t *testing.T) {
	tests := []struct {
		before, after int64
		want          bool
	}{
		{0, 0, false},     // no timer before or after
		{0, 100, true},    // a timer where the worker sleeps for none
		{100, 0, false},   // cancelled (an ACK came): the worker wakes once, harmlessly
		{100, 200, false}, // later: likewise
		{100, 100, false}, // unchanged
		{200, 100, true},  // sooner
	}
	for _, tt := range tests {
		if got := timerSooner(tt.before, tt.after); got != tt.want {
			t.Errorf("timerSooner(%d, %d) = %v, want %v", tt.before, tt.after, got, tt.want)
		}
	}
}
