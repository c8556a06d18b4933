// Package perf runs qperf's RDMA tests over vrdma devices: bandwidth
// (rc_bw, rc_bi_bw, rc_rdma_write_bw, rc_rdma_read_bw, ud_bw), latency
// (rc_lat, rc_rdma_write_lat, rc_rdma_read_lat, ud_lat) and atomic message
// rates (rc_compare_swap_mr, rc_fetch_add_mr), and reports them in qperf's
// words and units or as JSON lines.
//
// In loopback both ends run in this process on two devices of two
// instances. Bandwidth tests drive each end from its own goroutine and
// busy-poll their completion queues, as perftest and qperf do; the
// ping-pong tests drive both ends from one goroutine that spins, so that a
// round trip costs what the fabric costs and not a Go scheduler hand-off.
//
//	res, err := perf.Run(perf.Config{Tests: []string{"rc_rdma_write_bw"}, MsgSize: 1 << 20,
//		Duration: 2 * time.Second, A: optsA, B: optsB})
package perf
