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
		var resp proto.HostListResp
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

// tcpTargets prints the TCP-channel targets: RC WRITE bandwidth against
// one iperf3 TCP stream, 8-byte RC latency against qperf tcp_lat; async
// mode, UCX's tcp transport, the topology change time and the connection
// setup rate reported.
func tcpTargets(data map[key]*series) {
	med := func(src, test string, size int, pick func(*series) []float64) float64 {
		return median(data, src, test, size, pick)
	}
	rate := func(s *series) []float64 { return s.rate }
	line := targetTable()
	tcp := med("iperf3-tcp", "tcp_bw", 131072, bwOf)
	r := med("vrdma-tcp", "rc_rdma_write_bw", 1<<20, bwOf) / tcp
	line("vrdma-tcp rc_rdma_write_bw 1 MiB ≥ 0.9× one iperf3 TCP stream", r, r >= 0.9, "×")
	for _, t := range []string{"rc_rdma_write_bw", "rc_bw"} {
		for _, size := range []int{64 << 10, 1 << 20} {
			if t == "rc_rdma_write_bw" && size == 1<<20 {
				continue
			}
			r = med("vrdma-tcp", t, size, bwOf) / tcp
			line(fmt.Sprintf("vrdma-tcp %s %s next to one iperf3 TCP stream (report)", t, sizeText(size)), r, true, "×")
		}
		for _, size := range []int{64 << 10, 1 << 20} {
			r = med("vrdma-tcp-async", t, size, bwOf) / tcp
			line(fmt.Sprintf("vrdma-tcp-async %s %s next to one iperf3 TCP stream (report)", t, sizeText(size)), r, true, "×")
		}
	}
	tcpLat := med("qperf", "tcp_lat", 8, latOf)
	r = med("vrdma-tcp", "rc_lat", 8, latOf) / tcpLat
	line("vrdma-tcp rc_lat 8 B ≤ 1.0× qperf tcp_lat", r, r <= 1, "×")
	r = med("vrdma-tcp", "rc_rdma_write_lat", 8, latOf) / tcpLat
	line("vrdma-tcp rc_rdma_write_lat 8 B next to qperf tcp_lat (report)", r, true, "×")
	for _, t := range []string{"rc_lat", "rc_rdma_write_lat"} {
		r = med("vrdma-tcp-async", t, 8, latOf) / tcpLat
		line(fmt.Sprintf("vrdma-tcp-async %s 8 B next to qperf tcp_lat (report)", t), r, true, "×")
	}
	if ucx := med("ucx-tcp", "tag_lat", 8, latOf); ucx != 0 {
		r = med("vrdma-tcp", "rc_lat", 8, latOf) / ucx
		line("vrdma-tcp rc_lat 8 B next to UCX tcp tag_lat (report)", r, true, "×")
		r = med("vrdma-tcp-async", "rc_lat", 8, latOf) / ucx
		line("vrdma-tcp-async rc_lat 8 B next to UCX tcp tag_lat (report)", r, true, "×")
	} else {
		fmt.Println("| vrdma-tcp rc_lat 8 B next to UCX tcp tag_lat (report) | not measured: no ucx_perftest on this machine | |")
	}
	line("topology change: b's `vrdma link add` returns → a reports the rdma path to b (report)",
		med("vrdma-tcp", "topology_change_rdma", 0, latOf)/1000, true, " ms")
	line("topology change back: b's `vrdma link delete` returns → a reports the tcp path to b (report)",
		med("vrdma-tcp", "topology_change_tcp", 0, latOf)/1000, true, " ms")
	cm := false
	for k := range data {
		if k.source == "vrdma-cm" {
			cm = true
		}
	}
	if !cm {
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
