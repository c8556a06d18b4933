package stacks

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// ErrNoResult is returned (wrapped) when a program's output holds no
// result line: the program failed or printed something else.
var ErrNoResult = errors.New("no result in the program's output")

// Transport is one transport on one device as `ucx_info -d` lists it:
// "rc_verbs" on "vrdma0:1".
type Transport struct {
	Name   string // "rc_verbs", "ud_verbs", "tcp", ...
	Device string // "vrdma0:1", "lo", "memory", ...
	MD     string // the memory domain it belongs to ("vrdma0", "tcp", ...)
}

var (
	ucxMDRe        = regexp.MustCompile(`^#\s*Memory domain:\s*(\S+)`)
	ucxTransportRe = regexp.MustCompile(`^#\s*Transport:\s*(\S+)`)
	ucxDeviceRe    = regexp.MustCompile(`^#\s*Device:\s*(\S+)`)
)

// ParseUCXInfo reads the transports and their devices out of what
// `ucx_info -d` prints. It returns an error wrapping ErrNoResult when
// there is none.
func ParseUCXInfo(out string) ([]Transport, error) {
	var list []Transport
	var md, tl string
	for line := range strings.Lines(out) {
		line = strings.TrimSpace(line)
		if m := ucxMDRe.FindStringSubmatch(line); m != nil {
			md, tl = m[1], ""
		} else if m := ucxTransportRe.FindStringSubmatch(line); m != nil {
			tl = m[1]
		} else if m := ucxDeviceRe.FindStringSubmatch(line); m != nil && tl != "" {
			list = append(list, Transport{Name: tl, Device: m[1], MD: md})
		}
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("ucx_info -d: %w: no \"# Transport:\" with a \"# Device:\"", ErrNoResult)
	}
	return list, nil
}

// PerftestResult is the "Final:" line of ucx_perftest's client:
//
//	Final: ITERS P50 AVG OVERALL BW_AVG BW_OVERALL RATE_AVG RATE_OVERALL
//
// The three times are latencies (µs) in latency tests and the overhead of
// posting one message (µs) in bandwidth tests.
type PerftestResult struct {
	Iterations                    int
	P50Usec, AvgUsec, OverallUsec float64
	BWAvgMBps, BWOverallMBps      float64 // MB/s (2^20 bytes)
	RateAvg, RateOverall          float64 // messages per second
}

var ucxFinalRe = regexp.MustCompile(`(?m)^Final:\s+(\d+)((?:\s+[-0-9.e+infa]+){7})\s*$`)

// ParseUCXPerftest reads the "Final:" line out of ucx_perftest's output.
func ParseUCXPerftest(out string) (PerftestResult, error) {
	m := ucxFinalRe.FindStringSubmatch(out)
	if m == nil {
		return PerftestResult{}, fmt.Errorf("ucx_perftest: %w: no \"Final:\" line with 8 numbers", ErrNoResult)
	}
	var r PerftestResult
	r.Iterations, _ = strconv.Atoi(m[1])
	f := strings.Fields(m[2])
	dst := []*float64{&r.P50Usec, &r.AvgUsec, &r.OverallUsec, &r.BWAvgMBps, &r.BWOverallMBps, &r.RateAvg, &r.RateOverall}
	for i, p := range dst {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return PerftestResult{}, fmt.Errorf("ucx_perftest: \"Final:\" field %d %q: %w", i+2, f[i], err)
		}
		*p = v
	}
	return r, nil
}

// MPICheck is what testdata/mpicheck.c's rank 0 prints.
type MPICheck struct {
	OK       bool // "mpicheck: OK ranks=N"
	Ranks    int
	Failures int // with "mpicheck: FAILED ranks=N failures=F"
}

var (
	mpiCheckRe = regexp.MustCompile(`(?m)^mpicheck: (OK|FAILED) ranks=(\d+)(?: failures=(\d+))?\s*$`)
	pingpongRe = regexp.MustCompile(`(?m)^pingpong: (\d+) bytes (\d+) iters MB/s ([0-9.]+)\s*$`)
)

// ParseMPICheck reads mpicheck's verdict line.
func ParseMPICheck(out string) (MPICheck, error) {
	m := mpiCheckRe.FindStringSubmatch(out)
	if m == nil {
		return MPICheck{}, fmt.Errorf("mpicheck: %w: no \"mpicheck: OK|FAILED ranks=N\" line", ErrNoResult)
	}
	c := MPICheck{OK: m[1] == "OK"}
	c.Ranks, _ = strconv.Atoi(m[2])
	if m[3] != "" {
		c.Failures, _ = strconv.Atoi(m[3])
	}
	return c, nil
}

// Pingpong is mpicheck -pingpong's result: one-way bandwidth of a
// ping-pong of Bytes-byte messages.
type Pingpong struct {
	Bytes, Iters int
	MBps         float64 // 10^6 bytes per second, one way
}

// ParsePingpong reads mpicheck -pingpong's result line.
func ParsePingpong(out string) (Pingpong, error) {
	m := pingpongRe.FindStringSubmatch(out)
	if m == nil {
		return Pingpong{}, fmt.Errorf("mpicheck -pingpong: %w: no \"pingpong: N bytes N iters MB/s X\" line", ErrNoResult)
	}
	var p Pingpong
	p.Bytes, _ = strconv.Atoi(m[1])
	p.Iters, _ = strconv.Atoi(m[2])
	p.MBps, _ = strconv.ParseFloat(m[3], 64)
	return p, nil
}

// FioJob is one job of fio's --output-format=json report: its error
// number and the bytes and bandwidth of each direction.
type FioJob struct {
	Name  string `json:"jobname"`
	Error int    `json:"error"`
	Read  FioDir `json:"read"`
	Write FioDir `json:"write"`
}

// FioDir is one direction of a fio job.
type FioDir struct {
	IOBytes int64   `json:"io_bytes"`
	BWBytes int64   `json:"bw_bytes"` // bytes per second
	IOPS    float64 `json:"iops"`
}

// ParseFio reads the jobs out of fio's --output-format=json report. fio
// may print lines of its own ("fio: ...") before the JSON object; they
// are skipped.
func ParseFio(out string) ([]FioJob, error) {
	i := strings.Index(out, "{\n")
	if i < 0 {
		i = strings.Index(out, "{")
	}
	if i < 0 {
		return nil, fmt.Errorf("fio: %w: no JSON report (--output-format=json)", ErrNoResult)
	}
	var rep struct {
		Jobs []FioJob `json:"jobs"`
	}
	dec := json.NewDecoder(strings.NewReader(out[i:]))
	if err := dec.Decode(&rep); err != nil {
		return nil, fmt.Errorf("fio: reading its JSON report: %w", err)
	}
	if len(rep.Jobs) == 0 {
		return nil, fmt.Errorf("fio: %w: the JSON report has no jobs", ErrNoResult)
	}
	return rep.Jobs, nil
}
