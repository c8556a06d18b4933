package vrdma_test

import (
	"context"
	"fmt"
	"time"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/ibv"
)

// Connecting two queue pairs by hand, as ibv_rc_pingpong does: each side
// sends the other its Endpoint (LID, QPN, first PSN, GID) and, for a
// one-sided operation, the address and rkey of its region, over any
// channel of its own (ibv_rc_pingpong uses TCP); Connect takes the QP to
// RTS with them. The connection manager (Device.Dial, Device.Listen; the
// package example) does this exchange for a program.
func ExampleQP_Connect() {
	sock, stop := startDaemon() // in this process, for the example; a host runs `vrdma daemon`
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	a, err := openPeer(sock, "client")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer a.close()
	b, err := openPeer(sock, "server")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.close()

	// What each side sends the other: its endpoint as text (the message
	// ibv_rc_pingpong exchanges) and, from b, where a may write.
	ea, _ := a.qp.Endpoint(0) // GID index 0
	eb, _ := b.qp.Endpoint(0)
	msgA, msgB := ea.String(), eb.String()
	region := b.mr.Remote()

	// Each side connects its QP to the endpoint it received. nil options
	// are DefaultConnectOptions: the peer may write, read and do atomics.
	remoteB, err := vrdma.ParseEndpoint(msgB)
	if err != nil {
		fmt.Println(err)
		return
	}
	remoteA, err := vrdma.ParseEndpoint(msgA)
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := a.qp.Connect(remoteB, nil); err != nil {
		fmt.Println(err)
		return
	}
	if err := b.qp.Connect(remoteA, nil); err != nil {
		fmt.Println(err)
		return
	}

	n := copy(a.mr.Bytes(), "written by a")
	err = a.qp.PostSend([]vrdma.SendWR{{ID: 1, Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSignaled,
		SGL: []ibv.SGE{a.mr.SGE(0, n)}, RemoteAddr: region.Addr, RKey: region.RKey}})
	if err != nil {
		fmt.Println(err)
		return
	}
	wc := make([]vrdma.WorkCompletion, 1)
	if _, err := a.cq.PollWait(ctx, wc, 100); err != nil { // spin 100 polls, then sleep
		fmt.Println(err)
		return
	}
	fmt.Println(wc[0].Status, wc[0].Opcode, wc[0].ByteLen)
	fmt.Printf("%q\n", b.mr.Bytes()[:n])
	// Output:
	// SUCCESS RDMA_WRITE 12
	// "written by a"
}

// CQ.Wait sleeps until a completion is waiting and consumes none; Poll
// then takes every completion there is. A program that must not spin
// loops on the two; PollWait spins a while before it waits, for latency.
func ExampleCQ_Wait() {
	sock, stop := startDaemon() // in this process, for the example; a host runs `vrdma daemon`
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	p, err := openPeer(sock, "server")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.close()
	// A QP connected to itself (its own endpoint), as a loopback test
	// does: its SENDs arrive in its own receives.
	self, _ := p.qp.Endpoint(0)
	if err := p.qp.Connect(self, nil); err != nil {
		fmt.Println(err)
		return
	}
	const msgs = 3
	for i := range msgs {
		if err := p.qp.PostRecv([]vrdma.RecvWR{{ID: uint64(100 + i), SGL: []ibv.SGE{p.mr.SGE(32+8*i, 8)}}}); err != nil {
			fmt.Println(err)
			return
		}
	}
	for i := range msgs {
		// Unsignaled: only the receives complete.
		if err := p.qp.PostSend([]vrdma.SendWR{{ID: uint64(i), Opcode: ibv.WRSend, Inline: []byte(fmt.Sprint("msg ", i))}}); err != nil {
			fmt.Println(err)
			return
		}
	}

	wc := make([]vrdma.WorkCompletion, 16)
	for got := 0; got < msgs; {
		if err := p.cq.Wait(ctx); err != nil { // ibv_req_notify_cq and ibv_get_cq_event in one
			fmt.Println(err)
			return
		}
		n, err := p.cq.Poll(wc)
		if err != nil {
			fmt.Println(err)
			return
		}
		for _, c := range wc[:n] {
			off := 32 + 8*(c.ID-100)
			fmt.Printf("%d %v %q\n", c.ID, c.Opcode, p.mr.Bytes()[off:off+uint64(c.ByteLen)])
		}
		got += n
	}
	// Output:
	// 100 RECV "msg 0"
	// 101 RECV "msg 1"
	// 102 RECV "msg 2"
}

// The zero ConnectOptions is not the default: it lets the peer do nothing
// (no remote write, read or atomics: its RDMA WRITEs complete with
// REM_INV_REQ_ERR), waits for ever for acknowledgements and never retries.
// Pass nil for the defaults, or start from them and change what differs.
func ExampleDefaultConnectOptions() {
	o := vrdma.DefaultConnectOptions()
	o.Access = ibv.AccessRemoteWrite // the peer may write, not read
	o.Timeout = 18                   // 4.096 µs × 2^18: about 1 s per try
	fmt.Println(o.Access, o.Timeout, o.RetryCnt)
	fmt.Println(vrdma.ConnectOptions{}.Access)
	// Output:
	// REMOTE_WRITE 18 7
	// none
}
