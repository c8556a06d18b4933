package main

import "fmt"

// guestTargets prints the guest library's targets: Debian's unmodified
// tools on vrdma adapters next to the Go library on the same path, and
// qperf on vrdma next to qperf over TCP on loopback.
func guestTargets(data map[key]*series) {
	med := func(src, test string, size int, pick func(*series) []float64) float64 {
		return median(data, src, test, size, pick)
	}
	bw, lat := bwOf, latOf
	line := targetTable()
	r := med("perftest", "ib_write_bw", 1<<20, bw) / med("vrdma", "rc_rdma_write_bw", 1<<20, bw)
	line("perftest ib_write_bw 1 MiB ≥ 0.95× vrdma perf rc_rdma_write_bw 1 MiB", r, r >= 0.95, "×")
	r = med("perftest-async", "ib_send_lat", 8, lat) / med("vrdma-async", "rc_lat", 8, lat)
	line("perftest ib_send_lat 8 B (async) ≤ 1.0× vrdma perf --async rc_lat 8 B", r, r <= 1.0, "×")
	ucx := med("ucx-posix", "tag_lat", 8, lat)
	r = med("perftest-async", "ib_send_lat", 8, lat) / ucx
	line("perftest ib_send_lat 8 B (async) next to UCX posix tag_lat (report)", r, true, "×")
	r = med("vrdma-async", "rc_lat", 8, lat) / ucx
	line("vrdma perf --async rc_lat 8 B next to UCX posix tag_lat (report)", r, true, "×")
	r = med("qperf-vrdma", "rc_lat", 8, lat) / med("qperf-tcp", "tcp_lat", 8, lat)
	line("qperf rc_lat on vrdma next to qperf tcp_lat on loopback (report)", r, true, "×")
	r = med("qperf-vrdma", "rc_bw", 64<<10, bw) / med("qperf-tcp", "tcp_bw", 64<<10, bw)
	line(fmt.Sprintf("qperf rc_bw on vrdma next to qperf tcp_bw on loopback, %s (report)", sizeText(64<<10)), r, true, "×")
}
