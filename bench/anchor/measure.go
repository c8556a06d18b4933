package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/internal/perf"
)

// measure runs a benchmark command (N copies at once for N parallel
// clients), turns its output into result rows and adds what it cost:
//
//	anchor measure [-source S] [-topo T] [-format perf|iperf3|qperf] [-n N]
//	    [-size BYTES] [-pids P,...] [-daemons P,...] [-links SOCK,SOCK] [-netns NS] -- CMD ARGS...
//
// Each row gets the source and topology tags and, when the command gave
// one row (N copies merged into one: bandwidths and rates summed):
//   - cpu_s: CPU seconds of the command's processes (their rusage) and of
//     the -pids and -daemons processes (utime+stime from /proc) while it ran;
//   - daemon_cpu_s: the part of that spent by the -daemons;
//   - bytes: payload bytes moved, so that a table can print CPU per GB;
//   - with -links A,B: packets A's links sent and B's links received while it
//     ran (and the reverse), and A's active MTU in bytes;
//   - with -netns NS: the TCP segments NS retransmitted (RetransSegs).
func measure(args []string) error {
	fs := flag.NewFlagSet("measure", flag.ContinueOnError)
	source := fs.String("source", "", "the rows' source tag")
	topo := fs.String("topo", "", "the rows' topology tag")
	format := fs.String("format", "perf", "the command's output: perf (JSON lines), iperf3 (-J), qperf (text)")
	n := fs.Int("n", 1, "copies of the command to run at once; their rows are merged")
	size := fs.Int("size", 0, "qperf: the message size it was given")
	pids := fs.String("pids", "", "other processes whose CPU counts (servers), comma-separated")
	daemons := fs.String("daemons", "", "daemons whose CPU counts, comma-separated")
	links := fs.String("links", "", "the sending and the receiving daemon's sockets: link packet counters")
	netns := fs.String("netns", "", "network namespace whose TCP retransmissions count")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cmdArgs := fs.Args()
	if len(cmdArgs) == 0 || *n < 1 {
		return errors.New("usage: anchor measure [flags] -- COMMAND ARGS (-n ≥ 1)")
	}
	otherPIDs, err := parsePIDs(*pids)
	if err != nil {
		return err
	}
	daemonPIDs, err := parsePIDs(*daemons)
	if err != nil {
		return err
	}
	var socks []string
	if *links != "" {
		if socks = strings.Split(*links, ","); len(socks) != 2 {
			return fmt.Errorf("-links %q: give the sending and the receiving daemon's sockets", *links)
		}
	}

	l0, err := linkPackets(socks)
	if err != nil {
		return err
	}
	r0 := tcpRetrans(*netns)
	d0, o0 := sumCPU(daemonPIDs), sumCPU(otherPIDs)
	start := time.Now()
	outs, childCPU, runErr := runCopies(*n, cmdArgs)
	wall := time.Since(start)
	dCPU, oCPU := sumCPU(daemonPIDs)-d0, sumCPU(otherPIDs)-o0
	r1 := tcpRetrans(*netns)
	l1, err := linkPackets(socks)
	if err != nil {
		return err
	}
	if runErr != nil {
		return runErr
	}

	var rows []map[string]any
	for _, out := range outs {
		got, err := parseOutput(*format, out, *size)
		if err != nil {
			return fmt.Errorf("%s: %w", strings.Join(cmdArgs, " "), err)
		}
		rows = append(rows, got...)
	}
	if *n > 1 {
		if rows, err = mergeCopies(rows, *n); err != nil {
			return fmt.Errorf("%s: %w", strings.Join(cmdArgs, " "), err)
		}
	}
	for _, r := range rows {
		if *source != "" {
			r["source"] = *source
		}
		if *topo != "" {
			r["topo"] = *topo
		}
	}
	if len(rows) == 1 {
		r := rows[0]
		r["cpu_s"] = (childCPU + dCPU + oCPU).Seconds()
		if len(daemonPIDs) > 0 {
			r["daemon_cpu_s"] = dCPU.Seconds()
		}
		r["wall_s"] = wall.Seconds()
		if _, ok := r["bytes"]; !ok {
			r["bytes"] = num(r["bw"]) * num(r["time_s"])
		}
		if socks != nil {
			r["tx_pkts"] = l1.tx - l0.tx
			r["rx_pkts"] = l1.rx - l0.rx
			r["rev_tx_pkts"] = l1.revTx - l0.revTx
			r["rev_rx_pkts"] = l1.revRx - l0.revRx
			r["link_mtu"] = l1.mtu
			r["resent_pkts"] = l1.resent - l0.resent
			r["go_back_ns"] = l1.goBackNs - l0.goBackNs
			r["ack_timeouts"] = l1.timeouts - l0.timeouts
		}
		if *netns != "" && r0 >= 0 && r1 >= 0 {
			r["tcp_retrans"] = r1 - r0
		}
	}
	for _, r := range rows {
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		fmt.Println(string(b))
	}
	return nil
}

// runCopies runs n copies of the command at once and returns their
// outputs and the CPU time they used; their stderr is this one's.
func runCopies(n int, args []string) ([][]byte, time.Duration, error) {
	outs := make([][]byte, n)
	cpu := make([]time.Duration, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var out bytes.Buffer
			cmd := exec.Command(args[0], args[1:]...)
			cmd.Stdout, cmd.Stderr = &out, os.Stderr
			errs[i] = cmd.Run()
			if cmd.ProcessState != nil {
				cpu[i] = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
			}
			outs[i] = out.Bytes()
		}()
	}
	wg.Wait()
	var total time.Duration
	for _, c := range cpu {
		total += c
	}
	for i, err := range errs {
		if err != nil {
			return nil, 0, fmt.Errorf("%s (copy %d of %d): %w", strings.Join(args, " "), i+1, n, err)
		}
	}
	return outs, total, nil
}

// parseOutput turns one command's output into rows.
func parseOutput(format string, out []byte, size int) ([]map[string]any, error) {
	switch format {
	case "perf":
		return parsePerf(out)
	case "iperf3":
		r, err := parseIperf3(out)
		if err != nil {
			return nil, err
		}
		return []map[string]any{r}, nil
	case "qperf":
		return parseQperf(out, size)
	}
	return nil, fmt.Errorf("unknown format %q: perf, iperf3 or qperf", format)
}

// parsePerf reads vrdma perf --json's lines, one object each.
func parsePerf(out []byte) ([]map[string]any, error) {
	var rows []map[string]any
	for _, l := range bytes.Split(out, []byte("\n")) {
		l = bytes.TrimSpace(l)
		if len(l) == 0 {
			continue
		}
		var r map[string]any
		if err := json.Unmarshal(l, &r); err != nil {
			return nil, fmt.Errorf("not a JSON line: %q", l)
		}
		rows = append(rows, r)
	}
	if len(rows) == 0 {
		return nil, errors.New("no result")
	}
	return rows, nil
}

// iperf3Report is the part of iperf3 -J's report a row needs.
type iperf3Report struct {
	Error string `json:"error"`
	Start struct {
		TestStart struct {
			Protocol   string `json:"protocol"`
			NumStreams int    `json:"num_streams"`
			BlkSize    int    `json:"blksize"`
		} `json:"test_start"`
	} `json:"start"`
	End struct {
		Sum struct { // UDP
			Seconds     float64 `json:"seconds"`
			Packets     float64 `json:"packets"`
			LostPackets float64 `json:"lost_packets"`
		} `json:"sum"`
		SumSent struct {
			Retransmits float64 `json:"retransmits"`
		} `json:"sum_sent"`
		SumReceived struct { // TCP
			Seconds       float64 `json:"seconds"`
			Bytes         float64 `json:"bytes"`
			BitsPerSecond float64 `json:"bits_per_second"`
		} `json:"sum_received"`
		CPU struct {
			HostTotal   float64 `json:"host_total"`
			RemoteTotal float64 `json:"remote_total"`
		} `json:"cpu_utilization_percent"`
	} `json:"end"`
}

// parseIperf3 reads iperf3 -J's report: for UDP the received rate
// (datagrams that arrived × their size), for TCP the receiver's rate and
// the sender's retransmissions.
func parseIperf3(out []byte) (map[string]any, error) {
	var j iperf3Report
	if err := json.Unmarshal(out, &j); err != nil {
		return nil, fmt.Errorf("not an iperf3 -J report: %w", err)
	}
	if j.Error != "" {
		return nil, fmt.Errorf("iperf3: %s", j.Error)
	}
	ts, e := j.Start.TestStart, j.End
	r := map[string]any{"msg_size": ts.BlkSize, "qps": max(ts.NumStreams, 1),
		"cpu": e.CPU.HostTotal / 100, "rem_cpu": e.CPU.RemoteTotal / 100}
	switch ts.Protocol {
	case "UDP":
		if e.Sum.Seconds <= 0 || ts.BlkSize <= 0 {
			return nil, errors.New("iperf3: a UDP report without its time or datagram size")
		}
		got := (e.Sum.Packets - e.Sum.LostPackets) * float64(ts.BlkSize)
		r["test"], r["bw"], r["bytes"], r["time_s"] = "udp_bw", got/e.Sum.Seconds, got, e.Sum.Seconds
		r["msg_rate"] = got / float64(ts.BlkSize) / e.Sum.Seconds
	case "TCP":
		if e.SumReceived.Seconds <= 0 {
			return nil, errors.New("iperf3: a TCP report without its time")
		}
		r["test"], r["bw"], r["bytes"], r["time_s"] = "tcp_bw", e.SumReceived.BitsPerSecond/8, e.SumReceived.Bytes, e.SumReceived.Seconds
		r["tcp_retrans"] = e.SumSent.Retransmits
	default:
		return nil, fmt.Errorf("iperf3: protocol %q", ts.Protocol)
	}
	return r, nil
}

// parseQperf reads qperf's text: a "test:" line, then "latency = 16.8 us"
// or "bw = 1.9 GB/sec".
func parseQperf(out []byte, size int) ([]map[string]any, error) {
	var rows []map[string]any
	test := ""
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) == 1 && strings.HasSuffix(f[0], ":"):
			test = strings.TrimSuffix(f[0], ":")
		case len(f) == 4 && f[1] == "=" && test != "":
			v, err := strconv.ParseFloat(f[2], 64)
			if err != nil {
				return nil, fmt.Errorf("qperf: %q", l)
			}
			scale, ok := qperfUnits[f[0]+" "+f[3]]
			if !ok {
				continue
			}
			field := "latency_us"
			if f[0] == "bw" {
				field = "bw"
			}
			rows = append(rows, map[string]any{"test": test, "msg_size": size, field: v * scale})
		}
	}
	if len(rows) == 0 {
		return nil, errors.New("qperf: no result")
	}
	return rows, nil
}

// qperfUnits scale qperf's figures to µs and bytes per second.
var qperfUnits = map[string]float64{
	"latency ns": 1e-3, "latency us": 1, "latency ms": 1e3, "latency sec": 1e6,
	"bw bytes/sec": 1, "bw KB/sec": 1e3, "bw MB/sec": 1e6, "bw GB/sec": 1e9,
}

// mergeCopies merges the rows of n parallel copies of one command, test by
// test, into one row each: bandwidth, message rate, messages and bytes
// summed (each copy measured over its own window, and the windows
// overlap), time the longest. The copies' own cpu figures are dropped:
// each counts its daemon, which they share.
func mergeCopies(rows []map[string]any, n int) ([]map[string]any, error) {
	var out []map[string]any
	byTest := map[string]map[string]any{}
	count := map[string]int{}
	for _, r := range rows {
		t, _ := r["test"].(string)
		m := byTest[t]
		if m == nil {
			m = map[string]any{"test": t, "msg_size": r["msg_size"], "qps": 0}
			byTest[t] = m
			out = append(out, m)
		}
		count[t]++
		m["qps"] = m["qps"].(int) + max(int(num(r["qps"])), 1)
		for _, k := range []string{"bw", "msg_rate", "msgs", "bytes"} {
			if v, ok := r[k]; ok {
				m[k] = num(m[k]) + num(v)
			}
		}
		if _, ok := r["bytes"]; !ok {
			m["bytes"] = num(m["bytes"]) + num(r["bw"])*num(r["time_s"])
		}
		m["time_s"] = math.Max(num(m["time_s"]), num(r["time_s"]))
		if lat, ok := r["latency_us"]; ok { // ping-pong tests in parallel: the mean
			m["latency_us"] = num(m["latency_us"]) + num(lat)/float64(n)
		}
	}
	for t, c := range count {
		if c != n {
			return nil, fmt.Errorf("%d of %d copies reported %s", c, n, t)
		}
	}
	return out, nil
}

// num reads a JSON number (or an int set here); 0 for anything else.
func num(v any) float64 {
	switch x := v.(type) {
	case float64:
		return x
	case int:
		return float64(x)
	case uint64:
		return float64(x)
	}
	return 0
}

func parsePIDs(s string) ([]int, error) {
	var pids []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		p, err := strconv.Atoi(f)
		if err != nil || p <= 0 {
			return nil, fmt.Errorf("%q is not a process id", f)
		}
		pids = append(pids, p)
	}
	return pids, nil
}

// sumCPU returns the CPU time (user + system) the processes have used.
func sumCPU(pids []int) time.Duration {
	var t time.Duration
	for _, p := range pids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(p) + "/stat")
		if err != nil {
			continue
		}
		t += perf.StatCPU(string(b))
	}
	return t
}

// linkCounts are packets one daemon's links sent (tx) and the other's
// received (rx), and the reverse direction's.
type linkCounts struct {
	tx, rx, revTx, revRx uint64
	mtu                  int
	// The sender's adapters' go-back-Ns, how many of them followed a
	// retransmit timeout, and the packets they sent again (every
	// instance's: the client's may be any).
	goBackNs, timeouts, resent uint64
}

// linkPackets sums the link counters of socks[0] (the sender) and socks[1].
func linkPackets(socks []string) (linkCounts, error) {
	var c linkCounts
	if socks == nil {
		return c, nil
	}
	for i, s := range socks {
		adm, err := vrdma.DialAdmin(vrdma.Options{Socket: s, Client: "anchor measure"})
		if err != nil {
			return c, err
		}
		ls, err := adm.Links("")
		adm.Close()
		if err != nil {
			return c, err
		}
		if i == 0 {
			if c.goBackNs, c.timeouts, c.resent, err = resends(s); err != nil {
				return c, err
			}
		}
		for _, l := range ls {
			if i == 0 {
				c.tx += l.Counters.TxPackets
				c.revRx += l.Counters.RxPackets
				c.mtu = max(c.mtu, l.ActiveMTU.Bytes())
			} else {
				c.rx += l.Counters.RxPackets
				c.revTx += l.Counters.TxPackets
			}
		}
	}
	return c, nil
}

// resends sums the go-back-Ns, the retransmit timeouts among them and the
// packets sent again of every adapter of every instance on the daemon at
// sock.
func resends(sock string) (goBackNs, timeouts, resent uint64, err error) {
	adm, err := vrdma.DialAdmin(vrdma.Options{Socket: sock, Client: "anchor measure"})
	if err != nil {
		return 0, 0, 0, err
	}
	insts, err := adm.Instances()
	adm.Close()
	if err != nil {
		return 0, 0, 0, err
	}
	for _, in := range insts {
		o := vrdma.Options{Socket: sock, Instance: in.Name, Client: "anchor measure"}
		devs, err := vrdma.Devices(o)
		if err != nil {
			return 0, 0, 0, err
		}
		for _, info := range devs {
			d, err := vrdma.Open(info.Name, o)
			if err != nil {
				return 0, 0, 0, err
			}
			p, err := d.QueryPort(1)
			d.Close()
			if err != nil {
				return 0, 0, 0, err
			}
			c := p.Counters
			goBackNs += c.AckTimeouts + c.SeqNAKs + c.ImpliedNAKs
			timeouts += c.AckTimeouts
			resent += c.ResentPackets
		}
	}
	return goBackNs, timeouts, resent, nil
}

// tcpRetrans returns the TCP segments network namespace ns retransmitted
// (/proc/net/snmp's Tcp RetransSegs), or -1.
func tcpRetrans(ns string) float64 {
	if ns == "" {
		return -1
	}
	out, err := exec.Command("ip", "netns", "exec", ns, "cat", "/proc/net/snmp").Output()
	if err != nil {
		return -1
	}
	return snmpField(string(out), "Tcp", "RetransSegs")
}

// snmpField reads one counter of /proc/net/snmp's text, whose sections are
// a line of names and a line of values; -1 if it is not there.
func snmpField(text, section, name string) float64 {
	var names []string
	for _, l := range strings.Split(text, "\n") {
		f := strings.Fields(l)
		if len(f) < 2 || f[0] != section+":" {
			continue
		}
		if names == nil {
			names = f[1:]
			continue
		}
		for i, n := range names {
			if n == name && i+1 < len(f) {
				v, err := strconv.ParseFloat(f[i+1], 64)
				if err != nil {
					return -1
				}
				return v
			}
		}
		return -1
	}
	return -1
}
