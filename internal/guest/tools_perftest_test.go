package guest

import (
	"strconv"
	"strings"
	"testing"

	"github.com/vrdma/vrdma"
)

// Debian's perftest, unmodified, on vrdma adapters through the guest
// library, with its own out-of-band TCP exchange of addresses.

// perftestIters is each run's -n: enough to fill the queues more than once
// (a bw test posts 128 at a time), short enough to cost nothing.
const perftestIters = 200

func TestToolPerftest(t *testing.T) {
	const (
		plain = ""      // the default instance
		async = "async" // an instance whose adapters the daemon polls on a thread of its own
	)
	tests := []struct {
		name     string
		program  string
		args     []string
		instance string
	}{
		{"ib_write_bw", "ib_write_bw", nil, plain},
		{"ib_write_lat", "ib_write_lat", nil, plain},
		{"ib_read_bw", "ib_read_bw", nil, plain},
		{"ib_read_lat", "ib_read_lat", nil, plain},
		{"ib_send_bw", "ib_send_bw", nil, plain},
		{"ib_send_lat", "ib_send_lat", nil, plain},
		{"ib_atomic_bw", "ib_atomic_bw", nil, plain},
		{"ib_atomic_lat", "ib_atomic_lat", nil, plain},
		{"ib_send_bw UD", "ib_send_bw", []string{"-c", "UD"}, plain},
		{"ib_write_bw UC", "ib_write_bw", []string{"-c", "UC"}, plain},
		// ib_write_bw's client sleeps a second after it connects: the old
		// post API goes through ib_send_bw, which does not.
		{"ib_send_bw old post API", "ib_send_bw", []string{"--use_old_post_send"}, plain},
		{"ib_write_bw async", "ib_write_bw", nil, async},
	}
	for _, tt := range tests {
		requireTool(t, tt.program, "perftest")
	}
	h := newToolHost(t)
	info := h.createInstance(t, vrdma.InstanceSpec{Name: async, Adapters: 1, Async: true})
	if len(info.Adapters) != 1 || !info.Adapters[0].Async {
		t.Fatalf("instance %s: adapters %+v, want one in async mode", async, info.Adapters)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			port := freePort(t)
			// -F: a CPU whose frequency is not at its maximum is no reason
			// to refuse a report here.
			args := append([]string{"-d", "vrdma0", "-x", "0", "-p", strconv.Itoa(port), "-n", strconv.Itoa(perftestIters), "-F"}, tt.args...)
			srv := h.startServer(t, tt.instance, port, tt.program, args...)
			out := h.run(t, tt.instance, tt.program, append(args, "127.0.0.1")...)
			srv.wait(t)
			checkPerftest(t, tt.program, out)
		})
	}
}

// checkPerftest checks the client's result row, the line after the
// " #bytes #iterations ..." header: every iteration ran, and a bandwidth
// test moved bytes at a non-zero rate (BW average, MsgRate) or a latency
// test measured a non-zero typical and average time.
func checkPerftest(t *testing.T, program, out string) {
	t.Helper()
	var header, row []string
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if header != nil && len(f) > 0 {
			row = f
			break
		}
		if len(f) > 1 && f[0] == "#bytes" && f[1] == "#iterations" {
			header = f
		}
	}
	if row == nil {
		t.Fatalf("%s printed no result row; it printed:\n%s", program, out)
	}
	if len(row) < 4 || row[1] != strconv.Itoa(perftestIters) {
		t.Fatalf("%s: result row %q, want %d iterations under %q; it printed:\n%s", program, row, perftestIters, header, out)
	}
	var checks map[string]int // column name to its index in the row
	if strings.HasSuffix(program, "_lat") {
		// #bytes #iterations t_min[usec] t_max[usec] t_typical[usec] t_avg[usec] ...
		checks = map[string]int{"t_typical": 4, "t_avg": 5}
	} else {
		// #bytes #iterations BW peak[MB/sec] BW average[MB/sec] MsgRate[Mpps]
		checks = map[string]int{"BW average": 3, "MsgRate": 4}
	}
	for name, i := range checks {
		if i >= len(row) {
			t.Errorf("%s: result row %q has no %s column; it printed:\n%s", program, row, name, out)
			continue
		}
		if v := number(t, program+" "+name, row[i]); v <= 0 {
			t.Errorf("%s: %s is %g, want a positive number; it printed:\n%s", program, name, v, out)
		}
	}
}
