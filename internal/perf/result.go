package perf

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Result is one test's figures. BW is payload bytes per second in one
// direction (both together for rc_bi_bw); LatencyUS is one-way for the
// ping-pong tests and one operation for reads and atomics, as qperf reports.
// A client's results are from its view, with the server's CPU load as
// RemCPU.
type Result struct {
	Test      string  `json:"test"`
	MsgSize   int     `json:"msg_size"`
	BW        float64 `json:"bw,omitempty"`
	MsgRate   float64 `json:"msg_rate"`
	LatencyUS float64 `json:"latency_us,omitempty"`
	Seconds   float64 `json:"time_s"`
	Messages  uint64  `json:"msgs"`
	CPU       float64 `json:"cpu"`               // CPU seconds per second of this process and its daemon
	RemCPU    float64 `json:"rem_cpu,omitempty"` // the same of the server and its daemon, in a client
	Server    string  `json:"server,omitempty"`  // the server's host:port, in a client
	Async     bool    `json:"async"`
	Trusted   bool    `json:"trusted"`
	Threads   int     `json:"threads,omitempty"` // ping-pong tests: threads driving the two ends
	Path      string  `json:"path,omitempty"`
}

// WriteText prints r as qperf does ("rc_bw:\n    bw  =  2.77 GB/sec").
func (r Result) WriteText(w io.Writer, verbose bool) {
	fmt.Fprintf(w, "%s:\n", r.Test)
	if r.BW > 0 {
		fmt.Fprintf(w, "    bw        =  %s\n", bwText(r.BW))
	}
	if r.LatencyUS > 0 {
		fmt.Fprintf(w, "    latency   =  %s\n", latText(r.LatencyUS))
	}
	if r.BW == 0 && r.LatencyUS == 0 || verbose {
		fmt.Fprintf(w, "    msg_rate  =  %s\n", rateText(r.MsgRate))
	}
	if verbose {
		fmt.Fprintf(w, "    msg_size  =  %s\n", sizeText(r.MsgSize))
		fmt.Fprintf(w, "    time      =  %.3g sec\n", r.Seconds)
		fmt.Fprintf(w, "    msgs      =  %d\n", r.Messages)
		if r.Server != "" {
			fmt.Fprintf(w, "    loc_cpu   =  %.0f%% (this process and its daemon)\n", r.CPU*100)
			fmt.Fprintf(w, "    rem_cpu   =  %.0f%% (the server and its daemon)\n", r.RemCPU*100)
		} else {
			fmt.Fprintf(w, "    cpu       =  %.0f%% (this process and the daemon)\n", r.CPU*100)
		}
		if r.Path != "" {
			fmt.Fprintf(w, "    path      =  %s\n", r.Path)
		}
		if r.Threads > 0 {
			fmt.Fprintf(w, "    threads   =  %d\n", r.Threads)
		}
	}
}

// WriteJSON prints r as one JSON object on one line.
func (r Result) WriteJSON(w io.Writer) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

func bwText(bps float64) string {
	switch {
	case bps >= 1e9:
		return fmt.Sprintf("%.3g GB/sec", bps/1e9)
	case bps >= 1e6:
		return fmt.Sprintf("%.3g MB/sec", bps/1e6)
	case bps >= 1e3:
		return fmt.Sprintf("%.3g KB/sec", bps/1e3)
	}
	return fmt.Sprintf("%.3g bytes/sec", bps)
}

func latText(us float64) string {
	switch {
	case us >= 1e6:
		return fmt.Sprintf("%.3g sec", us/1e6)
	case us >= 1e3:
		return fmt.Sprintf("%.3g ms", us/1e3)
	case us >= 1:
		return fmt.Sprintf("%.3g us", us)
	}
	return fmt.Sprintf("%.3g ns", us*1e3)
}

func rateText(r float64) string {
	switch {
	case r >= 1e6:
		return fmt.Sprintf("%.3g M/sec", r/1e6)
	case r >= 1e3:
		return fmt.Sprintf("%.3g K/sec", r/1e3)
	}
	return fmt.Sprintf("%.3g /sec", r)
}

func sizeText(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// ParseSize reads a message size as qperf does: 64, 4K, 64KiB, 1M, 2MB.
func ParseSize(s string) (int, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	mult := 1
	for _, suf := range []struct {
		s string
		m int
	}{{"KIB", 1 << 10}, {"MIB", 1 << 20}, {"GIB", 1 << 30}, {"KB", 1 << 10}, {"MB", 1 << 20}, {"GB", 1 << 30}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}} {
		if strings.HasSuffix(t, suf.s) {
			t, mult = strings.TrimSuffix(t, suf.s), suf.m
			break
		}
	}
	var n int
	if _, err := fmt.Sscanf(t, "%d", &n); err != nil || n <= 0 || fmt.Sprint(n) != t {
		return 0, fmt.Errorf("message size %q: give a positive number of bytes, optionally with K, M or G (64, 4K, 1M)", s)
	}
	if n > (1<<31)/mult {
		return 0, fmt.Errorf("message size %q: at most 2 GiB", s)
	}
	return n * mult, nil
}
