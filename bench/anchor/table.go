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
	Topo      string  `json:"topo"`   // the between-hosts topology (lib.sh's topo_set), or ""
	Test      string  `json:"test"`
	MsgSize   int     `json:"msg_size"`
	QPs       int     `json:"qps"` // QPs or streams at once; 0 means 1
	BW        float64 `json:"bw"`
	LatencyUS float64 `json:"latency_us"`
	MsgRate   float64 `json:"msg_rate"`
	CPU       float64 `json:"cpu"`
	PerQP     float64 `json:"daemon_bytes_per_qp"`
	Ring      float64 `json:"ring_bytes_per_qp"`
	// What anchor measure adds: CPU seconds and bytes moved, link packets
	// and TCP retransmissions over the run.
	CPUS       float64  `json:"cpu_s"`
	DaemonCPUS float64  `json:"daemon_cpu_s"`
	Bytes      float64  `json:"bytes"`
	TxPkts     *float64 `json:"tx_pkts"`
	RxPkts     *float64 `json:"rx_pkts"`
	TCPRetrans *float64 `json:"tcp_retrans"`
	Resent     *float64 `json:"resent_pkts"`
	GoBackNs   *float64 `json:"go_back_ns"`
	Timeouts   *float64 `json:"ack_timeouts"`
}

// key names a row of the table: the same key in several runs is one row.
type key struct {
	topo, source, test string
	size, qps          int
}

// at is the key of (source, test, size) with one QP in topology topo.
func at(topo, source, test string, size int) key { return key{topo, source, test, size, 1} }

type series struct {
	bw, lat, rate, cpu, perQP, ring []float64
	cpuGB, daemonGB                 []float64 // CPU seconds per GB moved
	sent, lost, retrans             []float64 // link packets sent and lost, TCP retransmissions
	resent, goBackNs, timeouts      []float64 // the sender's go-back-Ns, the timeouts among them, the packets they sent again
}

// readRows reads a results file into series by key, in first-seen order;
// wide tells whether any row has a topology or a CPU cost (anchor measure's).
func readRows(path string) (data map[key]*series, order []key, wide bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, false, err
	}
	defer f.Close()
	data = map[key]*series{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r row
		if json.Unmarshal(sc.Bytes(), &r) != nil || r.Test == "" {
			continue
		}
		k := key{r.Topo, r.Source, r.Test, r.MsgSize, max(r.QPs, 1)}
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
		if r.Bytes > 0 && r.BW > 0 {
			add(&s.cpuGB, r.CPUS/(r.Bytes/1e9))
			add(&s.daemonGB, r.DaemonCPUS/(r.Bytes/1e9))
		}
		if r.TxPkts != nil && r.RxPkts != nil {
			s.sent = append(s.sent, *r.TxPkts)
			s.lost = append(s.lost, *r.TxPkts-*r.RxPkts)
		}
		if r.Resent != nil && r.GoBackNs != nil {
			s.resent = append(s.resent, *r.Resent)
			s.goBackNs = append(s.goBackNs, *r.GoBackNs)
		}
		if r.Timeouts != nil {
			s.timeouts = append(s.timeouts, *r.Timeouts)
		}
		if r.TCPRetrans != nil {
			s.retrans = append(s.retrans, *r.TCPRetrans)
		}
		wide = wide || r.Topo != "" || r.CPUS != 0
	}
	return data, order, wide, sc.Err()
}

// table prints, for every row key, the median and min–max of each figure
// over the runs in the file, then the targets.
func table(path string, targets func(map[key]*series)) error {
	data, order, wide, err := readRows(path)
	if err != nil {
		return err
	}
	if wide {
		wideTable(data, order)
	} else {
		narrowTable(data, order)
	}
	targets(data)
	return nil
}

// narrowTable is the table of the one-host benchmarks.
func narrowTable(data map[key]*series, order []key) {
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
}

// wideTable is the between-hosts table: a topology and QP count per row,
// CPU seconds per GB next to every bandwidth, and the link packets and
// TCP retransmissions of the rows measured under loss.
func wideTable(data map[key]*series, order []key) {
	fmt.Println("| topology | source | test | size | QPs | GB/s | latency µs (one-way) | msg/s | CPU s/GB, all processes | CPU s/GB, daemons | runs |")
	fmt.Println("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	lossy := false
	for _, k := range order {
		s := data[k]
		runs := max(len(s.bw), len(s.lat), len(s.rate))
		fmt.Printf("| %s | %s | %s | %s | %d | %s | %s | %s | %s | %s | %d |\n", k.topo, k.source, k.test, sizeText(k.size), k.qps,
			stat(s.bw, 1e9, "%.2f"), stat(s.lat, 1, "%.3g"), stat(s.rate, 1, "%.3g"), stat(s.cpuGB, 1, "%.2f"), stat(s.daemonGB, 1, "%.2f"), runs)
		lossy = lossy || isLossy(k.topo) && len(s.bw) > 0
	}
	if !lossy {
		return
	}
	fmt.Println()
	fmt.Println("Under loss, per run: the data packets the sender's links sent and how many of them the receiver's links never")
	fmt.Println("received; the sending adapters' go-back-Ns (`vrdma stat`'s local_ack_timeout_err + packet_seq_err +")
	fmt.Println("implied_nak_seq_err), how many of them waited for the retransmit timer (local_ack_timeout_err: 67 ms each at")
	fmt.Println("`vrdma perf`'s timeout 14, as perftest's) and the packets they sent again (resent_packets); TCP's retransmitted")
	fmt.Println("segments (iperf3's sender, or the TCP channel's namespace).")
	fmt.Println()
	fmt.Println("| topology | source | test | size | QPs | GB/s | data packets sent | lost (sent − received) | go-back-Ns | of them timeouts | packets sent again | TCP retransmits | runs |")
	fmt.Println("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, k := range order {
		s := data[k]
		if !isLossy(k.topo) || len(s.bw) == 0 {
			continue
		}
		fmt.Printf("| %s | %s | %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %d |\n", k.topo, k.source, k.test, sizeText(k.size), k.qps,
			stat(s.bw, 1e9, "%.2f"), stat(s.sent, 1, "%.0f"), stat(s.lost, 1, "%.0f"), stat(s.goBackNs, 1, "%.0f"), stat(s.timeouts, 1, "%.0f"), stat(s.resent, 1, "%.0f"),
			stat(s.retrans, 1, "%.0f"), len(s.bw))
	}
}

// lossRows reports, under a lossy topology t, source's 1 MiB write
// bandwidth with one QP (w) and 8 (w8, 0 if not measured) next to iperf3
// TCP's one stream (tcp) and 8 (tcp8).
func lossRows(line func(string, float64, bool, string), t, source string, w, w8, tcp, tcp8 float64) {
	line(fmt.Sprintf("%s: %s rc_rdma_write_bw 1 MiB next to one iperf3 TCP stream under the same loss (report)", t, source), w/tcp, true, "×")
	if w8 != 0 {
		line(fmt.Sprintf("%s: %s rc_rdma_write_bw 1 MiB, 8 QPs, next to iperf3 -P 8 under the same loss (report)", t, source), w8/tcp8, true, "×")
	}
}

// isLossy tells whether a topology drops packets on purpose (lib.sh's
// "-loss" suffix).
func isLossy(topo string) bool { return strings.Contains(topo, "loss") }

// median returns the median of one figure of (src, test, size) with one
// QP and no topology (the one-host tables), or 0.
func median(data map[key]*series, src, test string, size int, pick func(*series) []float64) float64 {
	return medianAt(data, at("", src, test, size), pick)
}

// medianAt returns the median of one figure of row k, or 0.
func medianAt(data map[key]*series, k key, pick func(*series) []float64) float64 {
	s := data[k]
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

// topologies returns the topologies the rows were measured on, sorted.
func topologies(data map[key]*series) []string {
	seen := map[string]bool{}
	var ts []string
	for k := range data {
		if k.topo != "" && !seen[k.topo] {
			seen[k.topo] = true
			ts = append(ts, k.topo)
		}
	}
	sort.Strings(ts)
	return ts
}

// anchorBW returns the median bandwidth of source's test in topology topo
// with qps streams, at whatever message size it ran (iperf3's UDP datagram
// follows the link MTU), and that size.
func anchorBW(data map[key]*series, topo, source, test string, qps int) (float64, int) {
	for k := range data {
		if k.topo == topo && k.source == source && k.test == test && k.qps == qps {
			return medianAt(data, k, bwOf), k.size
		}
	}
	return 0, 0
}

// wireTargets prints the between-hosts targets of each topology: RC WRITE
// bandwidth at 1 MiB against one iperf3 TCP stream (link MTU 4096: ≥ 1.0×
// with IPv6 GIDs, ≥ 0.7× with IPv4) or iperf3 UDP at vrdma's datagram
// size (link MTU 1024: ≥ 1.0×); 8 QPs against iperf3 -P 8 (≥ 1.0×);
// 8-byte RC latency against qperf udp_lat (≤ 1.2×); under loss, bandwidth
// next to iperf3 TCP's, reported.
func wireTargets(data map[key]*series) {
	line := targetTable()
	for _, t := range topologies(data) {
		tcp, _ := anchorBW(data, t, "iperf3-tcp", "tcp_bw", 1)
		tcp8, _ := anchorBW(data, t, "iperf3-tcp", "tcp_bw", 8)
		udp, udpLen := anchorBW(data, t, "iperf3-udp", "udp_bw", 1)
		w := medianAt(data, at(t, "vrdma-wire", "rc_rdma_write_bw", 1<<20), bwOf)
		w8 := medianAt(data, key{t, "vrdma-wire", "rc_rdma_write_bw", 1 << 20, 8}, bwOf)
		if isLossy(t) {
			lossRows(line, t, "vrdma-wire", w, w8, tcp, tcp8)
			continue
		}
		switch {
		case strings.HasPrefix(t, "jumbo") && strings.Contains(t, "v6"):
			line(fmt.Sprintf("%s: vrdma-wire rc_rdma_write_bw 1 MiB ≥ 1.0× one iperf3 TCP stream", t), w/tcp, w/tcp >= 1, "×")
		case strings.HasPrefix(t, "jumbo"):
			line(fmt.Sprintf("%s: vrdma-wire rc_rdma_write_bw 1 MiB ≥ 0.7× one iperf3 TCP stream", t), w/tcp, w/tcp >= 0.7, "×")
		default:
			line(fmt.Sprintf("%s: vrdma-wire rc_rdma_write_bw 1 MiB ≥ 1.0× iperf3 UDP received (%d-byte datagrams)", t, udpLen), w/udp, w/udp >= 1, "×")
			line(fmt.Sprintf("%s: vrdma-wire rc_rdma_write_bw 1 MiB next to one iperf3 TCP stream (report)", t), w/tcp, true, "×")
		}
		if w8 != 0 || tcp8 != 0 {
			line(fmt.Sprintf("%s: vrdma-wire rc_rdma_write_bw 1 MiB, 8 QPs at once ≥ 1.0× iperf3 -P 8", t), w8/tcp8, w8/tcp8 >= 1, "×")
		}
		a := medianAt(data, at(t, "vrdma-wire-async", "rc_rdma_write_bw", 1<<20), bwOf)
		line(fmt.Sprintf("%s: vrdma-wire-async rc_rdma_write_bw 1 MiB next to one iperf3 TCP stream (report)", t), a/tcp, true, "×")
		udpLat := medianAt(data, at(t, "qperf", "udp_lat", 8), latOf)
		for _, test := range []string{"rc_lat", "rc_rdma_write_lat"} {
			r := medianAt(data, at(t, "vrdma-wire", test, 8), latOf) / udpLat
			line(fmt.Sprintf("%s: vrdma-wire %s 8 B ≤ 1.2× qperf udp_lat", t, test), r, r <= 1.2, "×")
		}
		r := medianAt(data, at(t, "vrdma-wire-async", "rc_lat", 8), latOf) / medianAt(data, at(t, "vrdma-wire", "rc_lat", 8), latOf)
		line(fmt.Sprintf("%s: vrdma-wire-async rc_lat 8 B next to the default adapters' (report)", t), r, true, "×")
	}
}
