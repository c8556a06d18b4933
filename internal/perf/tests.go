package perf

import (
	"context"

	"github.com/vrdma/vrdma/ibv"
)

// test is one of qperf's tests as a pair of roles, which run in one
// process (loopback) or on two hosts (client and server).
type test struct {
	typ ibv.QPType
	// size turns the message size asked for into the one the ends use.
	size func(asked int) int
	// prepare readies each end once both are connected and before the
	// test starts (nil: nothing to do).
	prepare func(e *end) error
	active  role
	passive role
	// lockstep, for ping-pongs, plays both ends from one goroutine; a
	// loopback run with one thread uses it instead of the roles.
	lockstep func(ctx context.Context, a, b *end) (tally, error)
	// result makes the figures from the two ends' tallies.
	result func(size int, act, pas tally) Result
}

// tests maps qperf's test names to their implementations.
var tests = map[string]*test{
	"rc_bw":              sendBWTest(ibv.RC, false),
	"rc_bi_bw":           sendBWTest(ibv.RC, true),
	"uc_bw":              sendBWTest(ibv.UC, false),
	"ud_bw":              sendBWTest(ibv.UD, false),
	"rc_lat":             sendLatTest(ibv.RC),
	"uc_lat":             sendLatTest(ibv.UC),
	"ud_lat":             sendLatTest(ibv.UD),
	"rc_rdma_write_bw":   oneSidedBWTest(ibv.WRRDMAWrite),
	"rc_rdma_read_bw":    oneSidedBWTest(ibv.WRRDMARead),
	"rc_compare_swap_mr": oneSidedBWTest(ibv.WRAtomicCmpAndSwp),
	"rc_fetch_add_mr":    oneSidedBWTest(ibv.WRAtomicFetchAndAdd),
	"rc_rdma_write_lat": {typ: ibv.RC, size: atLeastOne, active: ping(newWriteEnd), passive: pong(newWriteEnd),
		lockstep: lockstep(newWriteEnd), result: latResult(2)},
	"rc_rdma_read_lat": {typ: ibv.RC, size: atLeastOne, active: oneSidedLat(ibv.WRRDMARead), passive: target,
		result: latResult(1)},
}

// TestNames lists the tests Run knows, conf included.
func TestNames() []string {
	return []string{"conf", "rc_bw", "rc_bi_bw", "rc_lat", "rc_rdma_write_bw", "rc_rdma_write_lat", "rc_rdma_read_bw",
		"rc_rdma_read_lat", "rc_compare_swap_mr", "rc_fetch_add_mr", "uc_bw", "uc_lat", "ud_bw", "ud_lat"}
}

// sendBWTest streams SENDs one way, or both ways for bi.
func sendBWTest(typ ibv.QPType, bi bool) *test {
	return &test{typ: typ, size: mtuCapped(typ), prepare: prepareRecvs, active: streamActive(bi), passive: streamPassive(bi),
		result: streamResult}
}

// sendLatTest plays SEND ping-pong.
func sendLatTest(typ ibv.QPType) *test {
	return &test{typ: typ, size: mtuCapped(typ), prepare: prepareRecvs, active: ping(newSendEnd), passive: pong(newSendEnd),
		lockstep: lockstep(newSendEnd), result: latResult(2)}
}

// oneSidedBWTest streams RDMA WRITEs, READs or atomics (8 bytes each).
func oneSidedBWTest(op ibv.Opcode) *test {
	size := atLeastOne
	if isAtomic(op) {
		size = func(int) int { return 8 }
	}
	return &test{typ: ibv.RC, size: size, active: oneSidedBW(op), passive: target, result: opsResult(!isAtomic(op))}
}

// mtuCapped lowers UD messages to the MTU.
func mtuCapped(typ ibv.QPType) func(int) int {
	return func(asked int) int {
		if typ == ibv.UD {
			return min(asked, 4096)
		}
		return atLeastOne(asked)
	}
}

func atLeastOne(asked int) int { return max(asked, 1) }
