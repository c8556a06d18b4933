// Package perf runs qperf's RDMA tests over vrdma devices: bandwidth
// (rc_bw, rc_bi_bw, uc_bw, ud_bw, rc_rdma_write_bw, rc_rdma_read_bw),
// latency (rc_lat, uc_lat, ud_lat, rc_rdma_write_lat, rc_rdma_read_lat)
// and atomic message rates (rc_compare_swap_mr, rc_fetch_add_mr), and
// reports them in qperf's words and units or as JSON lines.
//
// Each test is a pair of roles: an active one that drives it (the sender,
// the pinger, the requester of one-sided operations) and a passive one
// that serves it (the receiver, the ponger, the target). The roles run
// either both in this process on two devices of two instances (Run, the
// loopback), or on two hosts, as qperf's client and server do: the server
// (Serve) listens on TCP and, for each test a client (Dial, Client.Run)
// asks for, opens its end on its own daemon, trades addresses over the
// control connection (see proto.go), plays the passive role and sends back
// what it counted and its CPU load. The client prints the result from its
// view.
//
// Bandwidth tests drive each end from goroutines that busy-poll their
// completion queues, as perftest and qperf do; in loopback the ping-pong
// tests drive both ends from one goroutine that spins, so that a round
// trip costs what the fabric costs and not a Go scheduler hand-off.
//
//	err := perf.Run(ctx, perf.Config{Tests: []string{"rc_rdma_write_bw"}, MsgSize: 1 << 20,
//		Duration: 2 * time.Second, A: optsA, B: optsB}, emit)
//
//	go perf.Serve(ctx, ln, perf.ServerConfig{GIDIndex: perf.AutoGID})  // on one host
//	c, err := perf.Dial(ctx, perf.ClientConfig{Server: "host:19765", GIDIndex: perf.AutoGID})
//	res, err := c.Run(ctx, "rc_lat")                                     // on the other
package perf
