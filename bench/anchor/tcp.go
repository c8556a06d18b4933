package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/vrdma/vrdma/internal/proto"
	"github.com/vrdma/vrdma/switchview"
)

// topo runs a command that changes the switch's topology (a `vrdma link
// add` on another host) and times, from the command's return, until the
// daemon at SOCKET reports the path KIND ("rdma", "tcp") to HOST, asking it
// every 10 ms over one admin connection:
//
//	anchor topo SOCKET HOST KIND -- COMMAND ARGS...
func topo(args []string) error {
	if len(args) < 5 || args[3] != "--" {
		return errors.New("usage: anchor topo SOCKET HOST KIND -- COMMAND ARGS")
	}
	socket, host, kind, cmdArgs := args[0], args[1], args[2], args[4:]
	c, err := proto.Dial(socket)
	if err != nil {
		return err
	}
	defer c.Close()
	id := uint32(1)
	call := func(op proto.Op, req, resp any) error {
		id++
		if err := c.Send(proto.Header{Kind: proto.KindRequest, Op: op, ID: id}, req); err != nil {
			return err
		}
		for {
			h, body, fds, err := c.Recv()
			proto.CloseFDs(fds)
			if err != nil {
				return err
			}
			if h.Kind != proto.KindReply || h.ID != id {
				continue
			}
			if h.Code != proto.CodeOK {
				return fmt.Errorf("%v: %s", op, body)
			}
			if resp != nil {
				return json.Unmarshal(body, resp)
			}
			return nil
		}
	}
	if err := call(proto.OpHello, proto.HelloReq{Client: "anchor topo"}, nil); err != nil {
		return err
	}
	path := func() (string, error) {
		var resp switchview.HostList
		if err := call(proto.OpHostList, nil, &resp); err != nil {
			return "", err
		}
		for _, h := range resp.Hosts {
			if h.Name == host {
				return h.Path, nil
			}
		}
		return "", nil
	}
	cmd := exec.Command(cmdArgs[0], cmdArgs[1:]...)
	cmd.Stderr = os.Stderr
	cmdStart := time.Now()
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w", strings.Join(cmdArgs, " "), err)
	}
	start := time.Now()
	// How long the command itself took, for where the time goes.
	emit(map[string]any{"source": "vrdma-tcp", "test": "topology_cmd_" + kind, "msg_size": 0,
		"latency_us": float64(start.Sub(cmdStart).Microseconds())})
	polls := 0
	for {
		p, err := path()
		if err != nil {
			return err
		}
		polls++
		if strings.HasPrefix(p, kind+":") {
			break
		}
		if time.Since(start) > 30*time.Second {
			return fmt.Errorf("after 30 s the path to %s is still %q, not %s", host, p, kind)
		}
		time.Sleep(10 * time.Millisecond)
	}
	el := time.Since(start)
	emit(map[string]any{"source": "vrdma-tcp", "test": "topology_change_" + kind, "msg_size": 0,
		"latency_us": float64(el.Microseconds()), "polls": polls, "to": kind})
	return nil
}

// tcpTargets prints the TCP-channel targets of each topology: RC WRITE
// bandwidth at 1 MiB against one iperf3 TCP stream (≥ 1.0×), 8-byte RC
// latency against qperf tcp_lat (≤ 1.2×); 8 QPs against iperf3 -P 8, async
// mode, loss, UCX's tcp transport, the topology change time and the
// connection setup rate reported.
func tcpTargets(data map[key]*series) {
	med := func(src, test string, size int, pick func(*series) []float64) float64 {
		return median(data, src, test, size, pick)
	}
	rate := func(s *series) []float64 { return s.rate }
	line := targetTable()
	for _, t := range topologies(data) {
		tcp, _ := anchorBW(data, t, "iperf3-tcp", "tcp_bw", 1)
		tcp8, _ := anchorBW(data, t, "iperf3-tcp", "tcp_bw", 8)
		w := medianAt(data, at(t, "vrdma-tcp", "rc_rdma_write_bw", 1<<20), bwOf)
		w8 := medianAt(data, key{t, "vrdma-tcp", "rc_rdma_write_bw", 1 << 20, 8}, bwOf)
		if isLossy(t) {
			lossRows(line, t, "vrdma-tcp", w, w8, tcp, tcp8)
			continue
		}
		line(fmt.Sprintf("%s: vrdma-tcp rc_rdma_write_bw 1 MiB ≥ 1.0× one iperf3 TCP stream", t), w/tcp, w/tcp >= 1, "×")
		if w8 != 0 || tcp8 != 0 {
			line(fmt.Sprintf("%s: vrdma-tcp rc_rdma_write_bw 1 MiB, 8 QPs at once, next to iperf3 -P 8 (report)", t), w8/tcp8, true, "×")
		}
		for _, test := range []string{"rc_bw", "rc_rdma_write_bw"} {
			r := medianAt(data, at(t, "vrdma-tcp-async", test, 1<<20), bwOf) / tcp
			line(fmt.Sprintf("%s: vrdma-tcp-async %s 1 MiB next to one iperf3 TCP stream (report)", t, test), r, true, "×")
		}
		tcpLat := medianAt(data, at(t, "qperf", "tcp_lat", 8), latOf)
		r := medianAt(data, at(t, "vrdma-tcp", "rc_lat", 8), latOf) / tcpLat
		line(fmt.Sprintf("%s: vrdma-tcp rc_lat 8 B ≤ 1.2× qperf tcp_lat", t), r, r <= 1.2, "×")
		r = medianAt(data, at(t, "vrdma-tcp", "rc_rdma_write_lat", 8), latOf) / tcpLat
		line(fmt.Sprintf("%s: vrdma-tcp rc_rdma_write_lat 8 B next to qperf tcp_lat (report)", t), r, true, "×")
		for _, test := range []string{"rc_lat", "rc_rdma_write_lat"} {
			r = medianAt(data, at(t, "vrdma-tcp-async", test, 8), latOf) / tcpLat
			line(fmt.Sprintf("%s: vrdma-tcp-async %s 8 B next to qperf tcp_lat (report)", t, test), r, true, "×")
		}
		if ucx := medianAt(data, at(t, "ucx-tcp", "tag_lat", 8), latOf); ucx != 0 {
			r = medianAt(data, at(t, "vrdma-tcp", "rc_lat", 8), latOf) / ucx
			line(fmt.Sprintf("%s: vrdma-tcp rc_lat 8 B next to UCX tcp tag_lat (report)", t), r, true, "×")
		}
	}
	if !hasSource(data, "ucx-tcp") {
		fmt.Println("| vrdma-tcp rc_lat 8 B next to UCX tcp tag_lat (report) | not measured: no ucx_perftest on this machine | |")
	}
	line("topology change: b's `vrdma link add` returns → a reports the rdma path to b (report)",
		med("vrdma-tcp", "topology_change_rdma", 0, latOf)/1000, true, " ms")
	line("topology change back: b's `vrdma link delete` returns → a reports the tcp path to b (report)",
		med("vrdma-tcp", "topology_change_tcp", 0, latOf)/1000, true, " ms")
	if !hasSource(data, "vrdma-cm") {
		note := os.Getenv("ANCHOR_CM_NOTE")
		if note == "" {
			note = "not measured: no connection manager yet"
		}
		fmt.Printf("| connection setup rate, CM dial + accept (report) | %s | |\n", note)
		return
	}
	for _, sub := range []string{"same-host", "two-hosts"} {
		line(fmt.Sprintf("connection setup rate, CM dial + accept to RTS, %s (`BenchmarkCMConnect`), conn/s (report)", sub),
			med("vrdma-cm", "cm_connect_"+sub, 0, rate), true, "")
	}
}

// hasSource tells whether any row came from source.
func hasSource(data map[key]*series, source string) bool {
	for k := range data {
		if k.source == source {
			return true
		}
	}
	return false
}
