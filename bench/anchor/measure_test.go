package main

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/perf"
)

func TestParseIperf3(t *testing.T) {
	tests := []struct {
		name, in string
		want     map[string]float64 // numeric fields
		test     string
		err      string
	}{
		{name: "tcp, 8 streams",
			in: `{"start":{"test_start":{"protocol":"TCP","num_streams":8,"blksize":131072}},
				"end":{"sum_sent":{"retransmits":17},"sum_received":{"seconds":2,"bytes":4e9,"bits_per_second":16e9},
				"cpu_utilization_percent":{"host_total":55,"remote_total":80}}}`,
			test: "tcp_bw", want: map[string]float64{"bw": 2e9, "bytes": 4e9, "time_s": 2, "tcp_retrans": 17, "qps": 8, "msg_size": 131072, "cpu": 0.55, "rem_cpu": 0.8}},
		{name: "udp counts what arrived",
			in: `{"start":{"test_start":{"protocol":"UDP","num_streams":1,"blksize":1040}},
				"end":{"sum":{"seconds":2,"packets":1000,"lost_packets":100}}}`,
			test: "udp_bw", want: map[string]float64{"bw": 900 * 1040 / 2, "bytes": 900 * 1040, "msg_rate": 450, "qps": 1, "msg_size": 1040}},
		{name: "error", in: `{"start":{},"end":{},"error":"unable to connect to server"}`, err: "unable to connect"},
		{name: "not json", in: `iperf3: error`, err: "not an iperf3 -J report"},
		{name: "udp without time", in: `{"start":{"test_start":{"protocol":"UDP","blksize":1040}},"end":{"sum":{}}}`, err: "without its time"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := parseIperf3([]byte(tt.in))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r["test"] != tt.test {
				t.Errorf("test %v, want %s", r["test"], tt.test)
			}
			for k, v := range tt.want {
				if math.Abs(num(r[k])-v) > 1e-9*math.Max(1, v) {
					t.Errorf("%s = %v, want %v", k, r[k], v)
				}
			}
		})
	}
}

func TestParseQperf(t *testing.T) {
	tests := []struct {
		name, in string
		want     []map[string]any
	}{
		{"two latencies", "udp_lat:\n    latency  =  16.8 us\ntcp_lat:\n    latency  =  1.2 ms\n",
			[]map[string]any{{"test": "udp_lat", "latency_us": 16.8}, {"test": "tcp_lat", "latency_us": 1200.0}}},
		{"ns", "udp_lat:\n    latency  =  950 ns\n", []map[string]any{{"test": "udp_lat", "latency_us": 0.95}}},
		{"bw", "tcp_bw:\n    bw  =  1.9 GB/sec\n", []map[string]any{{"test": "tcp_bw", "bw": 1.9e9}}},
		{"nothing", "qperf: failed to connect\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rows, err := parseQperf([]byte(tt.in), 8)
			if tt.want == nil {
				if err == nil {
					t.Fatalf("rows %v, want an error", rows)
				}
				return
			}
			if err != nil || len(rows) != len(tt.want) {
				t.Fatalf("rows %v, %v; want %v", rows, err, tt.want)
			}
			for i, w := range tt.want {
				for k, v := range w {
					if f, ok := v.(float64); ok {
						if math.Abs(num(rows[i][k])-f) > 1e-9*f {
							t.Errorf("row %d %s = %v, want %v", i, k, rows[i][k], v)
						}
					} else if rows[i][k] != v {
						t.Errorf("row %d %s = %v, want %v", i, k, rows[i][k], v)
					}
				}
				if rows[i]["msg_size"] != 8 {
					t.Errorf("row %d msg_size %v, want 8", i, rows[i]["msg_size"])
				}
			}
		})
	}
}

func TestMergeCopies(t *testing.T) {
	row := func(bw, secs float64) map[string]any {
		return map[string]any{"test": "rc_rdma_write_bw", "msg_size": 1048576.0, "bw": bw, "time_s": secs, "msgs": bw * secs / 1048576, "cpu": 0.9}
	}
	tests := []struct {
		name            string
		rows            []map[string]any
		n               int
		bw, bytes, secs float64
		qps             int
		err             string
	}{
		{"two copies sum", []map[string]any{row(1e8, 2), row(3e8, 2.5)}, 2, 4e8, 2e8 + 7.5e8, 2.5, 2, ""},
		{"a copy reported nothing", []map[string]any{row(1e8, 2)}, 2, 0, 0, 0, 0, "1 of 2 copies"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := mergeCopies(tt.rows, tt.n)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil || len(got) != 1 {
				t.Fatalf("%v, %v", got, err)
			}
			m := got[0]
			if num(m["bw"]) != tt.bw || num(m["bytes"]) != tt.bytes || num(m["time_s"]) != tt.secs || m["qps"] != tt.qps {
				t.Errorf("merged %v; want bw %g, bytes %g, time %g, qps %d", m, tt.bw, tt.bytes, tt.secs, tt.qps)
			}
			if _, ok := m["cpu"]; ok {
				t.Errorf("merged row keeps the copies' cpu (each counts the shared daemon): %v", m)
			}
		})
	}
}

func TestStatCPU(t *testing.T) {
	tests := []struct {
		name, in string
		want     time.Duration
	}{
		{"plain", "42 (vrdma) S 1 42 42 0 -1 4194560 100 0 0 0 150 50 0 0 20 0 12 0 100 0 0", 2 * time.Second},
		{"a name with spaces and parens", "42 (a) b (c)) R 1 42 42 0 -1 0 0 0 0 0 7 3 0 0 20 0 1 0 1 0 0", 100 * time.Millisecond},
		{"cut short", "42 (x) S 1 2", 0},
		{"garbage", "nothing here", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := perf.StatCPU(tt.in); got != tt.want {
				t.Fatalf("perf.StatCPU = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestSnmpField(t *testing.T) {
	text := "Ip: Forwarding DefaultTTL\nIp: 1 64\nTcp: RtoAlgorithm ActiveOpens RetransSegs InErrs\nTcp: 1 10 37 0\nUdp: InDatagrams\nUdp: 5\n"
	tests := []struct {
		section, name string
		want          float64
	}{
		{"Tcp", "RetransSegs", 37},
		{"Tcp", "ActiveOpens", 10},
		{"Udp", "InDatagrams", 5},
		{"Tcp", "NoSuchField", -1},
		{"Sctp", "RetransSegs", -1},
	}
	for _, tt := range tests {
		if got := snmpField(text, tt.section, tt.name); got != tt.want {
			t.Errorf("%s %s = %v, want %v", tt.section, tt.name, got, tt.want)
		}
	}
}

func TestParsePIDs(t *testing.T) {
	tests := []struct {
		in   string
		want int // pids; -1: an error
	}{
		{"", 0}, {"12", 1}, {"12,34", 2}, {" 12 , 34 ,", 2}, {"12,x", -1}, {"0", -1}, {"-5", -1},
	}
	for _, tt := range tests {
		p, err := parsePIDs(tt.in)
		if (err != nil) != (tt.want < 0) || tt.want >= 0 && len(p) != tt.want {
			t.Errorf("parsePIDs(%q) = %v, %v; want %d pids", tt.in, p, err, tt.want)
		}
	}
}
