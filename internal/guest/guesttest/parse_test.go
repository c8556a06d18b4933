package guesttest

import (
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/vrdma/vrdma/internal/netns"
)

func readTestdata(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The testdata files are what Debian's programs printed through the guest
// library between two namespace hosts over RoCEv2.
func TestParsePingpong(t *testing.T) {
	tests := []struct {
		file string
		want Pingpong
	}{
		{"ibv_rc_pingpong.client.txt", Pingpong{Bytes: 819200, Seconds: 0.03, Mbps: 261.53, Iters: 100, UsecPerIter: 250.59}},
		{"ibv_ud_pingpong.client.txt", Pingpong{Bytes: 102400, Seconds: 0.09, Mbps: 9.32, Iters: 100, UsecPerIter: 879.10}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got, err := ParsePingpong(readTestdata(t, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("ParsePingpong = %+v, want %+v", got, tt.want)
			}
		})
	}
	for _, bad := range []string{"", "Couldn't connect to 10.0.0.1:18515\n", "8192000 bytes in 0.13 seconds = 506.53 Mbit/sec\n"} {
		if p, err := ParsePingpong(bad); err == nil {
			t.Errorf("ParsePingpong(%q) = %+v, want an error", bad, p)
		}
	}
}

func TestParsePerftest(t *testing.T) {
	tests := []struct {
		file string
		want []Perftest
	}{
		{"ib_write_bw.client.txt", []Perftest{{Bytes: 65536, Iterations: 100, PeakMBps: 161.25, AvgMBps: 161.17, MsgRateMpps: 0.002579}}},
		{"ib_atomic_bw.server.txt", []Perftest{{Bytes: 8, Iterations: 100, PeakMBps: 0.93, AvgMBps: 0.92, MsgRateMpps: 0.120608}}},
		{"ib_read_lat.client.txt", []Perftest{{Bytes: 2, Iterations: 100, Latency: true, MinUsec: 31.83, MaxUsec: 173.01,
			TypicalUsec: 58.18, AvgUsec: 62.83, StdevUsec: 26.24, P99Usec: 173.01, P999Usec: 173.01}}},
		{"ib_send_lat.server.txt", []Perftest{{Bytes: 2, Iterations: 100, Latency: true, MinUsec: 27.47, MaxUsec: 98.11,
			TypicalUsec: 44.26, AvgUsec: 43.63, StdevUsec: 7.38, P99Usec: 98.11, P999Usec: 98.11}}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got, err := ParsePerftest(readTestdata(t, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParsePerftest = %+v, want %+v", got, tt.want)
			}
		})
	}
	// Several sizes (-a), and what is not a result.
	all := " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n" +
		" 2          1000             1.50               1.40   \t\t   0.700000\n" +
		" 4          1000             3.00               2.80   \t\t   0.700000\n" +
		"---------------------------------------------------------------------------------------\n"
	if rows, err := ParsePerftest(all); err != nil || len(rows) != 2 || rows[1].Bytes != 4 || rows[1].AvgMBps != 2.8 {
		t.Errorf("ParsePerftest(two sizes) = %+v, %v", rows, err)
	}
	// An emulated guest's perftest may divide by a zero cycle count.
	nan := " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] \n" +
		" 64      20          inf            inf          inf      \t       inf         \t-nan   \t\tinf     \t\tinf    \n"
	if rows, err := ParsePerftest(nan); err != nil || len(rows) != 1 || rows[0].Iterations != 20 || !math.IsInf(rows[0].AvgUsec, 1) || !math.IsNaN(rows[0].StdevUsec) {
		t.Errorf("ParsePerftest(inf and -nan) = %+v, %v", rows, err)
	}
	for name, bad := range map[string]string{
		"no table":    readTestdata(t, "ib_read_lat.server.txt"),
		"empty":       "",
		"short row":   " #bytes #iterations    t_min[usec]    t_max[usec]\n 2 100 3.0\n",
		"not numbers": " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n 2 1000 x 1.4 0.7\n",
	} {
		if rows, err := ParsePerftest(bad); err == nil {
			t.Errorf("ParsePerftest(%s) = %+v, want an error", name, rows)
		}
	}
}

func TestListenRe(t *testing.T) {
	const header = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
	tests := []struct {
		name string
		in   string
		want bool
	}{
		{"IPv4 listener", header + "   0: 00000000:4853 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 10698 1\n", true},
		{"IPv6 listener", header + "   0: 00000000000000000000000000000000:4853 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1\n", true},
		{"connected, not listening", header + "   1: FE5B2F0A:4853 015B2F0A:B0C4 01 00000000:00000000 00:00000000 00000000     0        0 1\n", false},
		{"a client's port", header + "   1: FE5B2F0A:B0C4 015B2F0A:4853 0A 00000000:00000000 00:00000000 00000000     0        0 1\n", false},
		{"other port", header + "   0: 00000000:4854 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1\n", false},
		{"nothing", header, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := listenRe(PingpongPort).MatchString(tt.in); got != tt.want {
				t.Errorf("listening = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestPackageOf(t *testing.T) {
	for name, want := range map[string]string{"ibv_rc_pingpong": "ibverbs-utils", "ib_write_bw": "perftest", "qperf": "qperf", "rping": "rdmacm-utils", "ucmatose": "rdmacm-utils", "tshark": "tshark"} {
		if got := packageOf(name); got != want {
			t.Errorf("packageOf(%s) = %s, want %s", name, got, want)
		}
	}
}

func TestProgramCommand(t *testing.T) {
	// Command only builds the command line: no namespace is entered.
	p := Program{Host: &netns.Host{NS: "ns-x"}, Lib: "/lib/dir", Socket: "/s.sock", Instance: "vm1", Env: []string{"VRDMA_DEBUG=1"}}
	got := strings.Join(p.Command(t.Context(), "ibv_devinfo", "-v").Args, " ")
	want := "ip netns exec ns-x env LD_LIBRARY_PATH=/lib/dir VRDMA_SOCKET=/s.sock VRDMA_INSTANCE=vm1 VRDMA_DEBUG=1 ibv_devinfo -v"
	if got != want {
		t.Errorf("Command = %q, want %q", got, want)
	}
}
