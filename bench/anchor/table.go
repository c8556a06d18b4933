package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"
)

// row is one line of the results file: what was measured, and its figures.
type row struct {
	Source    string  `json:"source"` // vrdma, vrdma-async, ucx, go, eventfd
	Test      string  `json:"test"`
	MsgSize   int     `json:"msg_size"`
	BW        float64 `json:"bw"`
	LatencyUS float64 `json:"latency_us"`
	MsgRate   float64 `json:"msg_rate"`
	CPU       float64 `json:"cpu"`
	PerQP     float64 `json:"daemon_bytes_per_qp"`
	Ring      float64 `json:"ring_bytes_per_qp"`
}

type key struct {
	source, test string
	size         int
}

type series struct {
	bw, lat, rate, cpu, perQP, ring []float64
}

// table prints, for every (source, test, size), the median and min–max of
// each figure over the runs in the file.
func table(path string, targets func(map[key]*series)) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	data := map[key]*series{}
	var order []key
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r row
		if json.Unmarshal(sc.Bytes(), &r) != nil || r.Test == "" {
			continue
		}
		k := key{r.Source, r.Test, r.MsgSize}
		s := data[k]
		if s == nil {
			s = &series{}
			data[k] = s
			order = append(order, k)
		}
		add := func(dst *[]float64, v float64) {
			if v != 0 {
				*dst = append(*dst, v)
			}
		}
		add(&s.bw, r.BW)
		add(&s.lat, r.LatencyUS)
		add(&s.rate, r.MsgRate)
		add(&s.cpu, r.CPU)
		add(&s.perQP, r.PerQP)
		add(&s.ring, r.Ring)
	}
	fmt.Println("| source | test | size | GB/s | latency µs (one-way) | msg/s | CPU (cores) | runs |")
	fmt.Println("|---|---|---:|---:|---:|---:|---:|---:|")
	for _, k := range order {
		s := data[k]
		runs := max(len(s.bw), len(s.lat), len(s.rate), len(s.perQP))
		if k.test == "qp_memory" {
			fmt.Printf("| %s | daemon memory per QP | %d QPs | | | | | %d |\n", k.source, 1000, runs)
			fmt.Printf("|  | … daemon resident memory per QP, bytes | | %s | | | | |\n", stat(s.perQP, 1, "%.0f"))
			fmt.Printf("|  | … ring memory allocated per QP (64+64 WRs, 4 SGEs), bytes; touched only as used | | %s | | | | |\n", stat(s.ring, 1, "%.0f"))
			continue
		}
		fmt.Printf("| %s | %s | %s | %s | %s | %s | %s | %d |\n", k.source, k.test, sizeText(k.size),
			stat(s.bw, 1e9, "%.2f"), stat(s.lat, 1, "%.3g"), stat(s.rate, 1, "%.3g"), stat(s.cpu, 1, "%.2f"), runs)
	}
	if err := sc.Err(); err != nil {
		return err
	}
	targets(data)
	return nil
}

// median returns the median of one figure of (src, test, size), or 0.
func median(data map[key]*series, src, test string, size int, pick func(*series) []float64) float64 {
	s := data[key{src, test, size}]
	if s == nil {
		return 0
	}
	v := append([]float64(nil), pick(s)...)
	if len(v) == 0 {
		return 0
	}
	sort.Float64s(v)
	if len(v)%2 == 0 {
		return (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return v[len(v)/2]
}

func bwOf(s *series) []float64  { return s.bw }
func latOf(s *series) []float64 { return s.lat }

// targetTable starts the table of targets and returns its line printer.
func targetTable() func(what string, ratio float64, ok bool, unit string) {
	fmt.Println()
	fmt.Println("### Targets (ratios of the medians above)")
	fmt.Println()
	fmt.Println("| target | measured | verdict |")
	fmt.Println("|---|---:|---|")
	return func(what string, ratio float64, ok bool, unit string) {
		if ratio == 0 || math.IsNaN(ratio) || math.IsInf(ratio, 0) {
			fmt.Printf("| %s | not measured | |\n", what)
			return
		}
		verdict := "met"
		if strings.HasSuffix(what, "(report)") {
			verdict = "reported"
		} else if !ok {
			verdict = "**missed**"
		}
		fmt.Printf("| %s | %.2f%s | %s |\n", what, ratio, unit, verdict)
	}
}

// sameHostTargets prints the same-host targets as ratios of medians
// measured in this run.
func sameHostTargets(data map[key]*series) {
	med := func(src, test string, size int, pick func(*series) []float64) float64 {
		return median(data, src, test, size, pick)
	}
	bw, lat := bwOf, latOf
	line := targetTable()
	copy1M := med("go", "copy", 1<<20, bw)
	for _, src := range []string{"vrdma", "vrdma-async", "vrdma-trusted"} {
		for _, t := range []string{"rc_rdma_write_bw", "rc_rdma_read_bw"} {
			r := med(src, t, 1<<20, bw) / copy1M
			line(fmt.Sprintf("%s %s 1 MiB ≥ 0.9× Go copy 1 MiB", src, t), r, r >= 0.9, "×")
		}
	}
	r := med("vrdma-async", "rc_lat", 8, lat) / med("ucx-posix", "tag_lat", 8, lat)
	line("vrdma-async rc_lat 8 B ≤ 2× UCX posix tag_lat (p50)", r, r <= 2, "×")
	r = med("vrdma-async", "rc_rdma_write_lat", 8, lat) / med("ucx-posix", "ucp_put_lat", 8, lat)
	line("vrdma-async rc_rdma_write_lat 8 B ≤ 2× UCX posix ucp_put_lat (p50)", r, r <= 2, "×")
	r = med("vrdma-trusted", "rc_rdma_write_lat", 8, lat) / med("ucx-posix", "ucp_put_lat", 8, lat)
	line("vrdma-trusted rc_rdma_write_lat 8 B ≤ 2× UCX posix ucp_put_lat (p50)", r, r <= 2, "×")
	r = med("vrdma", "rc_lat", 8, lat) / med("eventfd", "wake", 8, lat)
	line("vrdma rc_lat 8 B (no async) next to an eventfd wake-up across cores (report)", r, true, "×")
}

func stat(v []float64, div float64, format string) string {
	if len(v) == 0 {
		return ""
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	f := func(x float64) string { return fmt.Sprintf(format, x/div) }
	if len(s) == 1 || math.Abs(s[0]-s[len(s)-1]) < 1e-12 {
		return "**" + f(med) + "**"
	}
	return fmt.Sprintf("**%s** (%s–%s)", f(med), f(s[0]), f(s[len(s)-1]))
}

func sizeText(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}

// wireTargets prints the between-hosts targets: RC WRITE bandwidth against
// iperf3 UDP's received rate at vrdma's datagram size (aim: one iperf3 TCP
// stream), 8-byte RC latency against qperf udp_lat.
func wireTargets(data map[key]*series) {
	med := func(src, test string, size int, pick func(*series) []float64) float64 {
		return median(data, src, test, size, pick)
	}
	line := targetTable()
	udp := med("iperf3-udp", "udp_bw", 1040, bwOf)
	tcp := med("iperf3-tcp", "tcp_bw", 131072, bwOf)
	for _, src := range []string{"vrdma-wire", "vrdma-wire-async"} {
		for _, size := range []int{64 << 10, 1 << 20} {
			r := med(src, "rc_rdma_write_bw", size, bwOf) / udp
			line(fmt.Sprintf("%s rc_rdma_write_bw %s ≥ 0.7× iperf3 UDP received (1040-byte datagrams)", src, sizeText(size)), r, r >= 0.7, "×")
			r = med(src, "rc_rdma_write_bw", size, bwOf) / tcp
			line(fmt.Sprintf("%s rc_rdma_write_bw %s next to one iperf3 TCP stream (aim 1×)", src, sizeText(size)), r, r >= 1, "×")
		}
	}
	udpLat := med("qperf", "udp_lat", 8, latOf)
	r := med("vrdma-wire", "rc_lat", 8, latOf) / udpLat
	line("vrdma-wire rc_lat 8 B ≤ 1.0× qperf udp_lat", r, r <= 1, "×")
	r = med("vrdma-wire", "rc_rdma_write_lat", 8, latOf) / udpLat
	line("vrdma-wire rc_rdma_write_lat 8 B ≤ 1.0× qperf udp_lat", r, r <= 1, "×")
	r = med("vrdma-wire-async", "rc_lat", 8, latOf) / udpLat
	line("vrdma-wire-async rc_lat 8 B next to qperf udp_lat (report)", r, true, "×")
	r = med("vrdma-wire-async", "rc_rdma_write_lat", 8, latOf) / udpLat
	line("vrdma-wire-async rc_rdma_write_lat 8 B next to qperf udp_lat (report)", r, true, "×")
}
