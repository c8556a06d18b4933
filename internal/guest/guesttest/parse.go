package guesttest

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Pingpong is what ibverbs-utils' ibv_*_pingpong print when they finish:
// "8192000 bytes in 0.13 seconds = 506.53 Mbit/sec" and
// "1000 iters in 0.13 seconds = 129.38 usec/iter".
type Pingpong struct {
	Bytes       int64   // bytes sent and received, both ways
	Seconds     float64 // wall time of the iterations
	Mbps        float64 // Mbit/sec
	Iters       int     // round trips
	UsecPerIter float64 // µs per round trip
}

var (
	ppBytesRe = regexp.MustCompile(`(?m)^(\d+) bytes in ([0-9.]+) seconds = ([0-9.]+) Mbit/sec$`)
	ppItersRe = regexp.MustCompile(`(?m)^(\d+) iters in ([0-9.]+) seconds = ([0-9.]+) usec/iter$`)
)

// ParsePingpong reads a pingpong's result lines out of its output.
func ParsePingpong(out string) (Pingpong, error) {
	b := ppBytesRe.FindStringSubmatch(out)
	i := ppItersRe.FindStringSubmatch(out)
	if b == nil || i == nil {
		return Pingpong{}, fmt.Errorf("no \"N bytes in S seconds\" and \"N iters in S seconds\" result lines in the pingpong's output:\n%s", out)
	}
	var p Pingpong
	var err error
	p.Bytes, _ = strconv.ParseInt(b[1], 10, 64)
	p.Seconds, _ = strconv.ParseFloat(b[2], 64)
	p.Mbps, _ = strconv.ParseFloat(b[3], 64)
	p.Iters, err = strconv.Atoi(i[1])
	if err != nil {
		return Pingpong{}, fmt.Errorf("pingpong iterations %q: %w", i[1], err)
	}
	p.UsecPerIter, _ = strconv.ParseFloat(i[3], 64)
	return p, nil
}

// Perftest is one row of the result table perftest's programs print: a
// bandwidth test's
//
//	#bytes  #iterations  BW peak[MB/sec]  BW average[MB/sec]  MsgRate[Mpps]
//
// or a latency test's
//
//	#bytes #iterations t_min t_max t_typical t_avg t_stdev 99% 99.9%  (all [usec])
type Perftest struct {
	Bytes      int
	Iterations int
	Latency    bool // a latency test's row (the Usec fields), else bandwidth's

	PeakMBps, AvgMBps, MsgRateMpps float64 // bandwidth tests

	MinUsec, MaxUsec, TypicalUsec, AvgUsec, StdevUsec, P99Usec, P999Usec float64 // latency tests
}

// ParsePerftest reads the rows of the result table out of a perftest
// program's output (one per message size: several with -a). A program
// that prints no table (the server of a read or write latency test) gives
// an error.
func ParsePerftest(out string) ([]Perftest, error) {
	lines := strings.Split(out, "\n")
	var rows []Perftest
	for i, line := range lines {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "#bytes" || f[1] != "#iterations" {
			continue
		}
		latency := strings.Contains(line, "t_min")
		want := 5
		if latency {
			want = 9
		}
		for _, row := range lines[i+1:] {
			v := strings.Fields(row)
			if len(v) == 0 || strings.HasPrefix(v[0], "---") {
				break
			}
			if len(v) < want {
				return nil, fmt.Errorf("perftest result row %q: %d fields, want %d under %q", row, len(v), want, strings.TrimSpace(line))
			}
			nums := make([]float64, want)
			for k := range nums {
				x, err := perfNumber(v[k])
				if err != nil {
					return nil, fmt.Errorf("perftest result row %q: field %d: %w", row, k+1, err)
				}
				nums[k] = x
			}
			r := Perftest{Bytes: int(nums[0]), Iterations: int(nums[1]), Latency: latency}
			if latency {
				r.MinUsec, r.MaxUsec, r.TypicalUsec, r.AvgUsec = nums[2], nums[3], nums[4], nums[5]
				r.StdevUsec, r.P99Usec, r.P999Usec = nums[6], nums[7], nums[8]
			} else {
				r.PeakMBps, r.AvgMBps, r.MsgRateMpps = nums[2], nums[3], nums[4]
			}
			rows = append(rows, r)
		}
		break
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("no result table (\"#bytes #iterations ...\" and a row) in perftest's output:\n%s", out)
	}
	return rows, nil
}

// perfNumber parses one field of a perftest result row. perftest prints
// what C's printf makes of its arithmetic: "inf", "nan" or "-nan" when
// its cycle counter gave it nothing to divide by (as in an emulated
// guest), which strconv reads but for the sign of a NaN.
func perfNumber(f string) (float64, error) {
	if strings.EqualFold(f, "-nan") {
		f = f[1:]
	}
	return strconv.ParseFloat(f, 64)
}
