package stacks

import (
	"errors"
	"testing"
)

// The samples are what Debian's programs printed on vrdma adapters.
const ucxInfoSample = `#
# Memory domain: self
#     Component: self
#             register: unlimited, cost: 0 nsec
#
#      Transport: self
#         Device: memory0
#           Type: loopback
#
# Memory domain: tcp
#      Transport: tcp
#         Device: eth0
#
# Memory domain: vrdma0
#     Component: ib
#      Transport: rc_verbs
#         Device: vrdma0:1
#           Type: network
#
#      Transport: ud_verbs
#         Device: vrdma0:1
`

func TestParseUCXInfo(t *testing.T) {
	got, err := ParseUCXInfo(ucxInfoSample)
	if err != nil {
		t.Fatal(err)
	}
	want := []Transport{{"self", "memory0", "self"}, {"tcp", "eth0", "tcp"}, {"rc_verbs", "vrdma0:1", "vrdma0"}, {"ud_verbs", "vrdma0:1", "vrdma0"}}
	if len(got) != len(want) {
		t.Fatalf("ParseUCXInfo = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("transport %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if _, err := ParseUCXInfo("# Memory domain: self\n"); !errors.Is(err, ErrNoResult) {
		t.Errorf("no transports: %v, want ErrNoResult", err)
	}
}

func TestParseUCXPerftest(t *testing.T) {
	tests := []struct {
		name string
		out  string
		want PerftestResult
		err  bool
	}{
		{"bandwidth", `+--------------+--------------+------------------------------+---------------------+-----------------------+
|    Stage     | # iterations | 50.0%ile | average | overall |  average |  overall |  average  |  overall  |
+--------------+--------------+----------+---------+---------+----------+----------+-----------+-----------+
Final:                    50      1.163    19.722    19.722     3169.05    3169.05       50705       50705
`, PerftestResult{Iterations: 50, P50Usec: 1.163, AvgUsec: 19.722, OverallUsec: 19.722, BWAvgMBps: 3169.05, BWOverallMBps: 3169.05, RateAvg: 50705, RateOverall: 50705}, false},
		{"latency, progress lines first", `                   414     12.100    13.000    13.000        0.59       0.59       76923       76923
Final:                  1000     13.866    16.002    16.002        0.48       0.48       62491       62491
`, PerftestResult{Iterations: 1000, P50Usec: 13.866, AvgUsec: 16.002, OverallUsec: 16.002, BWAvgMBps: 0.48, BWOverallMBps: 0.48, RateAvg: 62491, RateOverall: 62491}, false},
		{"aborted", "[vm:1:0] ud_ep.c:276  Fatal: UD endpoint 0x1 to <no debug data>: unhandled timeout error\n", PerftestResult{}, true},
		{"short line", "Final: 100 1.0 2.0\n", PerftestResult{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseUCXPerftest(tt.out)
			if (err != nil) != tt.err {
				t.Fatalf("err = %v, want an error: %v", err, tt.err)
			}
			if tt.err && !errors.Is(err, ErrNoResult) {
				t.Errorf("err = %v, want ErrNoResult", err)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseMPICheck(t *testing.T) {
	tests := []struct {
		out  string
		want MPICheck
		err  bool
	}{
		{"noise\nmpicheck: OK ranks=4\n", MPICheck{OK: true, Ranks: 4}, false},
		{"mpicheck: FAILED ranks=2 failures=3\n", MPICheck{Ranks: 2, Failures: 3}, false},
		{"mpirun noticed that process rank 0 ... exited on signal 6 (Aborted).\n", MPICheck{}, true},
	}
	for _, tt := range tests {
		got, err := ParseMPICheck(tt.out)
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("ParseMPICheck(%q) = %+v, %v; want %+v, error %v", tt.out, got, err, tt.want, tt.err)
		}
	}
	p, err := ParsePingpong("pingpong: 1048576 bytes 300 iters MB/s 2875.3\n")
	if err != nil || p != (Pingpong{Bytes: 1 << 20, Iters: 300, MBps: 2875.3}) {
		t.Errorf("ParsePingpong = %+v, %v", p, err)
	}
	if _, err := ParsePingpong("nothing"); !errors.Is(err, ErrNoResult) {
		t.Errorf("ParsePingpong(nothing): %v, want ErrNoResult", err)
	}
}

func TestParseFio(t *testing.T) {
	out := `fio: some note
{
  "fio version" : "fio-3.33",
  "jobs" : [
    {
      "jobname" : "client",
      "error" : 0,
      "read" : {"io_bytes" : 0, "bw_bytes" : 0, "iops" : 0.0},
      "write" : {"io_bytes" : 8388608, "bw_bytes" : 838860800, "iops" : 12800.5}
    }
  ]
}
`
	jobs, err := ParseFio(out)
	if err != nil {
		t.Fatal(err)
	}
	want := FioJob{Name: "client", Write: FioDir{IOBytes: 8 << 20, BWBytes: 838860800, IOPS: 12800.5}}
	if len(jobs) != 1 || jobs[0] != want {
		t.Errorf("ParseFio = %+v, want [%+v]", jobs, want)
	}
	for name, bad := range map[string]string{"no JSON": "fio: pid=1, err=1/\n", "no jobs": `{"jobs": []}`, "broken": `{"jobs": [`} {
		if _, err := ParseFio(bad); err == nil {
			t.Errorf("ParseFio(%s): no error", name)
		}
	}
}
