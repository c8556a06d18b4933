package perf

import "time"

// tally is what one end counted: messages received, operations completed
// or round trips, their bytes, and the time the counting took. The
// passive end sends its tally back over the control connection.
type tally struct {
	Ops   uint64        `json:"ops"`
	Bytes uint64        `json:"bytes"`
	Time  time.Duration `json:"ns"`
}

// rate returns n per second of t (0 for no time).
func rate(n uint64, t time.Duration) float64 {
	if t <= 0 {
		return 0
	}
	return float64(n) / t.Seconds()
}

// streamResult adds up what the two ends received: the one direction of
// rc_bw, both of rc_bi_bw.
func streamResult(size int, act, pas tally) Result {
	return Result{MsgSize: size, Seconds: max(act.Time, pas.Time).Seconds(), Messages: act.Ops + pas.Ops,
		BW:      rate(act.Bytes, act.Time) + rate(pas.Bytes, pas.Time),
		MsgRate: rate(act.Ops, act.Time) + rate(pas.Ops, pas.Time)}
}

// opsResult is the active end's operations: RDMA WRITEs or READs (with
// their bandwidth) or atomics (without).
func opsResult(withBW bool) func(int, tally, tally) Result {
	return func(size int, act, _ tally) Result {
		r := Result{MsgSize: size, Seconds: act.Time.Seconds(), Messages: act.Ops, MsgRate: rate(act.Ops, act.Time)}
		if withBW {
			r.BW = rate(act.Ops*uint64(size), act.Time)
		}
		return r
	}
}

// latResult is the active end's round trips of hops messages each: two for
// a ping-pong, one for a READ.
func latResult(hops int) func(int, tally, tally) Result {
	return func(size int, act, _ tally) Result {
		r := Result{MsgSize: size, Seconds: act.Time.Seconds(), Messages: act.Ops * uint64(hops)}
		if act.Ops > 0 {
			r.LatencyUS = act.Time.Seconds() * 1e6 / float64(act.Ops) / float64(hops)
		}
		r.MsgRate = rate(r.Messages, act.Time)
		return r
	}
}
