package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// render writes rows to a results file and returns what table prints for
// it with targets.
func render(t *testing.T, rows []string, targets func(map[key]*series)) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "results.jsonl")
	if err := os.WriteFile(path, []byte(strings.Join(rows, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	done := make(chan string)
	go func() { b, _ := io.ReadAll(r); done <- string(b) }()
	err = table(path, targets)
	os.Stdout = stdout
	w.Close()
	out := <-done
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// bwRow and latRow are result lines as anchor measure writes them.
func bwRow(topo, src, test string, size, qps int, bw float64) string {
	return fmt.Sprintf(`{"source":%q,"topo":%q,"test":%q,"msg_size":%d,"qps":%d,"bw":%g,"bytes":%g,"cpu_s":2,"daemon_cpu_s":1}`,
		src, topo, test, size, qps, bw, bw*2)
}

func latRow(topo, src, test string, us float64) string {
	return fmt.Sprintf(`{"source":%q,"topo":%q,"test":%q,"msg_size":8,"latency_us":%g}`, src, topo, test, us)
}

func TestWireTargetsVerdicts(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		name string
		rows []string
		want []string // regexps the targets table must hold
	}{
		{"jumbo IPv6 at one TCP stream is met",
			[]string{bwRow("jumbo-v6", "vrdma-wire", "rc_rdma_write_bw", mib, 1, 2e9), bwRow("jumbo-v6", "iperf3-tcp", "tcp_bw", 131072, 1, 1.9e9)},
			[]string{`jumbo-v6: vrdma-wire rc_rdma_write_bw 1 MiB ≥ 1.0× one iperf3 TCP stream \| 1.05× \| met`}},
		{"jumbo IPv4 needs 0.7×",
			[]string{bwRow("jumbo-v4", "vrdma-wire", "rc_rdma_write_bw", mib, 1, 1.5e9), bwRow("jumbo-v4", "iperf3-tcp", "tcp_bw", 131072, 1, 2e9)},
			[]string{`jumbo-v4: vrdma-wire rc_rdma_write_bw 1 MiB ≥ 0.7× one iperf3 TCP stream \| 0.75× \| met`}},
		{"link MTU 1024 against UDP at its datagram size, missed",
			[]string{bwRow("std-v4", "vrdma-wire", "rc_rdma_write_bw", mib, 1, 0.1e9), bwRow("std-v4", "iperf3-udp", "udp_bw", 1040, 1, 0.2e9),
				bwRow("std-v4", "iperf3-tcp", "tcp_bw", 131072, 1, 2e9)},
			[]string{`std-v4: vrdma-wire rc_rdma_write_bw 1 MiB ≥ 1.0× iperf3 UDP received \(1040-byte datagrams\) \| 0.50× \| \*\*missed\*\*`,
				`std-v4: vrdma-wire rc_rdma_write_bw 1 MiB next to one iperf3 TCP stream \(report\) \| 0.05× \| reported`}},
		{"8 QPs against iperf3 -P 8",
			[]string{bwRow("jumbo-v6", "vrdma-wire", "rc_rdma_write_bw", mib, 8, 1e9), bwRow("jumbo-v6", "iperf3-tcp", "tcp_bw", 131072, 8, 4e9)},
			[]string{`jumbo-v6: vrdma-wire rc_rdma_write_bw 1 MiB, 8 QPs at once ≥ 1.0× iperf3 -P 8 \| 0.25× \| \*\*missed\*\*`}},
		{"latency within 1.2× of udp_lat",
			[]string{latRow("std-v6", "vrdma-wire", "rc_lat", 18), latRow("std-v6", "vrdma-wire", "rc_rdma_write_lat", 30), latRow("std-v6", "qperf", "udp_lat", 16)},
			[]string{`std-v6: vrdma-wire rc_lat 8 B ≤ 1.2× qperf udp_lat \| 1.12× \| met`,
				`std-v6: vrdma-wire rc_rdma_write_lat 8 B ≤ 1.2× qperf udp_lat \| 1.88× \| \*\*missed\*\*`}},
		{"loss is reported, not judged",
			[]string{bwRow("std-v4-loss", "vrdma-wire", "rc_rdma_write_bw", mib, 1, 0.01e9), bwRow("std-v4-loss", "iperf3-tcp", "tcp_bw", 131072, 1, 1e9)},
			[]string{`std-v4-loss: vrdma-wire rc_rdma_write_bw 1 MiB next to one iperf3 TCP stream under the same loss \(report\) \| 0.01× \| reported`}},
		{"an anchor missing is not measured",
			[]string{bwRow("jumbo-v6", "vrdma-wire", "rc_rdma_write_bw", mib, 1, 2e9)},
			[]string{`jumbo-v6: vrdma-wire rc_rdma_write_bw 1 MiB ≥ 1.0× one iperf3 TCP stream \| not measured`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := render(t, tt.rows, wireTargets)
			for _, w := range tt.want {
				if !regexp.MustCompile(w).MatchString(out) {
					t.Errorf("targets lack %q:\n%s", w, out)
				}
			}
		})
	}
}

func TestTCPTargetsVerdicts(t *testing.T) {
	rows := []string{
		bwRow("std-v4", "vrdma-tcp", "rc_rdma_write_bw", 1<<20, 1, 0.8e9), bwRow("std-v4", "iperf3-tcp", "tcp_bw", 131072, 1, 2e9),
		latRow("std-v4", "vrdma-tcp", "rc_lat", 15), latRow("std-v4", "qperf", "tcp_lat", 14),
		`{"source":"vrdma-tcp","test":"topology_change_rdma","msg_size":0,"latency_us":2500}`,
	}
	out := render(t, rows, tcpTargets)
	for _, w := range []string{
		`std-v4: vrdma-tcp rc_rdma_write_bw 1 MiB ≥ 1.0× one iperf3 TCP stream \| 0.40× \| \*\*missed\*\*`,
		`std-v4: vrdma-tcp rc_lat 8 B ≤ 1.2× qperf tcp_lat \| 1.07× \| met`,
		`a reports the rdma path to b \(report\) \| 2.50 ms \| reported`,
	} {
		if !regexp.MustCompile(w).MatchString(out) {
			t.Errorf("targets lack %q:\n%s", w, out)
		}
	}
}

func TestWideTableShowsCPUPerGBAndLoss(t *testing.T) {
	rows := []string{
		// 2 GB moved for 2 CPU seconds, 1 of them the daemons'.
		bwRow("std-v4", "vrdma-wire", "rc_rdma_write_bw", 1<<20, 1, 1e9),
		`{"source":"vrdma-wire","topo":"std-v4-loss","test":"rc_rdma_write_bw","msg_size":1048576,"bw":1e8,"bytes":2e8,"cpu_s":1,"tx_pkts":1000,"rx_pkts":990,"go_back_ns":7,"ack_timeouts":2,"resent_pkts":640}`,
		`{"source":"iperf3-tcp","topo":"std-v4-loss","test":"tcp_bw","msg_size":131072,"bw":1e9,"bytes":2e9,"cpu_s":1,"tcp_retrans":0}`,
	}
	out := render(t, rows, func(map[key]*series) {})
	for _, w := range []string{
		`\| std-v4 \| vrdma-wire \| rc_rdma_write_bw \| 1 MiB \| 1 \| \*\*1.00\*\* \|  \|  \| \*\*1.00\*\* \| \*\*0.50\*\* \| 1 \|`,
		`\| std-v4-loss \| vrdma-wire \| rc_rdma_write_bw \| 1 MiB \| 1 \| \*\*0.10\*\* \| \*\*1000\*\* \| \*\*10\*\* \| \*\*7\*\* \| \*\*2\*\* \| \*\*640\*\* \|  \| 1 \|`,
		`\| std-v4-loss \| iperf3-tcp \| tcp_bw \| 128 KiB \| 1 \| \*\*1.00\*\* \|  \|  \|  \|  \|  \| \*\*0\*\* \| 1 \|`,
	} {
		if !regexp.MustCompile(w).MatchString(out) {
			t.Errorf("table lacks %q:\n%s", w, out)
		}
	}
}

func TestNarrowTableUnchangedForOneHostRows(t *testing.T) {
	out := render(t, []string{`{"source":"vrdma","test":"rc_lat","msg_size":8,"latency_us":3.5,"cpu":1.2}`}, func(map[key]*series) {})
	if !strings.Contains(out, "| source | test | size | GB/s | latency µs (one-way) | msg/s | CPU (cores) | runs |") ||
		!strings.Contains(out, "| vrdma | rc_lat | 8 B |  | **3.5** |  | **1.20** | 1 |") {
		t.Errorf("the one-host table changed:\n%s", out)
	}
}
