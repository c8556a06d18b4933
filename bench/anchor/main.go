// Command anchor measures what vrdma is compared with on this machine and
// turns a benchmark run's JSON lines into the table of docs/perf.md:
//
//	anchor copy SIZE SECONDS      single-thread Go copy() bandwidth, GB/s
//	anchor wake ITERATIONS        eventfd ping-pong between two threads on two cores, one-way µs
//	anchor qpmem N                daemon memory per QP for N RC QPs ($VRDMA_SOCKET)
//	anchor table RESULTS.jsonl    medians per row, as a Markdown table
//	anchor wiretable RESULTS.jsonl    the same, with the between-hosts targets
//	anchor tcptable RESULTS.jsonl     the same, with the TCP-channel targets (tcp.go)
//	anchor guesttable RESULTS.jsonl   the same, with the guest library's targets (guest.go)
//	anchor topo SOCKET HOST KIND -- CMD...  time from CMD's return until HOST's path is KIND (tcp.go)
//	anchor measure [flags] -- CMD...    run a benchmark command (N copies at once), its rows with their CPU cost (measure.go)
//	anchor cm serve|connect|hold ...    connection setup through vrdma's connection manager (cm.go)
//	anchor tcpconn serve|connect|hold ...   the same with TCP connect/accept, its anchor (cm.go)
//
// Every figure is printed as one JSON object on one line, like vrdma perf --json.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: anchor copy SIZE SECONDS | wake N | qpmem N | table FILE | wiretable FILE | tcptable FILE | guesttable FILE | topo SOCKET HOST KIND -- CMD... | measure [flags] -- CMD... | cm ... | tcpconn ...")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "copy":
		err = copyBW(os.Args[2:])
	case "wake":
		err = wake(os.Args[2:])
	case "qpmem":
		err = qpmem(os.Args[2:])
	case "table":
		err = table(os.Args[2], sameHostTargets)
	case "wiretable":
		err = table(os.Args[2], wireTargets)
	case "tcptable":
		err = table(os.Args[2], tcpTargets)
	case "guesttable":
		err = table(os.Args[2], guestTargets)
	case "topo":
		err = topo(os.Args[2:])
	case "measure":
		err = measure(os.Args[2:])
	case "cm":
		err = cmBench(os.Args[2:])
	case "tcpconn":
		err = tcpConn(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "anchor:", err)
		os.Exit(1)
	}
}

func emit(v map[string]any) {
	b, _ := json.Marshal(v)
	fmt.Println(string(b))
}

// copyBW copies SIZE bytes between two buffers for SECONDS, as the
// single-thread Go copy anchor does.
func copyBW(args []string) error {
	size, err := strconv.Atoi(args[0])
	if err != nil || len(args) < 2 {
		return fmt.Errorf("copy SIZE SECONDS")
	}
	secs, err := strconv.ParseFloat(args[1], 64)
	if err != nil {
		return err
	}
	src, dst := make([]byte, size), make([]byte, size)
	for i := range src {
		src[i] = byte(i)
	}
	n := 0
	start := time.Now()
	deadline := start.Add(time.Duration(secs * float64(time.Second)))
	for time.Now().Before(deadline) {
		for i := 0; i < 16; i++ {
			copy(dst, src)
		}
		n += 16
	}
	el := time.Since(start).Seconds()
	emit(map[string]any{"source": "go", "test": "copy", "msg_size": size, "bw": float64(n) * float64(size) / el})
	return nil
}

// wake plays ping-pong through two eventfds between two OS threads pinned
// to CPUs 0 and 1, blocking in read: the cost of a cross-core wake-up.
func wake(args []string) error {
	n, err := strconv.Atoi(args[0])
	if err != nil {
		return err
	}
	if runtime.NumCPU() < 2 {
		return fmt.Errorf("needs two CPUs")
	}
	a, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		return err
	}
	b, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		return err
	}
	one := []byte{1, 0, 0, 0, 0, 0, 0, 0}
	buf := make([]byte, 8)
	pin := func(cpu int) {
		runtime.LockOSThread()
		var set unix.CPUSet
		set.Set(cpu)
		_ = unix.SchedSetaffinity(0, &set)
	}
	done := make(chan struct{})
	go func() {
		pin(1)
		rb := make([]byte, 8)
		for i := 0; i < n; i++ {
			_, _ = unix.Read(a, rb)
			_, _ = unix.Write(b, one)
		}
		close(done)
	}()
	pin(0)
	start := time.Now()
	for i := 0; i < n; i++ {
		_, _ = unix.Write(a, one)
		_, _ = unix.Read(b, buf)
	}
	el := time.Since(start)
	<-done
	emit(map[string]any{"source": "eventfd", "test": "wake", "msg_size": 8, "latency_us": el.Seconds() * 1e6 / float64(n) / 2})
	return nil
}
