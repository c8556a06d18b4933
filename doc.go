// Package vrdma is the verbs interface of vrdma, a software RDMA fabric: the
// ibverbs object model (devices, protection domains, memory regions,
// completion queues, queue pairs, shared receive queues, address handles,
// asynchronous events) for Go programs, executed by the host daemon
// (`vrdma daemon`) that moves the bytes: one copy when both ends are on the
// same host.
//
// The library never touches the network. It talks to the daemon over a
// unix socket (VRDMA_SOCKET, default /run/vrdma/vrdma.sock) for commands and
// through shared memory for work requests and completions, so posting and
// polling are function calls that do not allocate.
//
//	dev, err := vrdma.Open("vrdma0")           // VRDMA_INSTANCE picks the instance
//	pd, _ := dev.AllocPD()
//	mr, _ := pd.AllocMR(1<<20, vrdma.AccessLocalWrite|vrdma.AccessRemoteWrite)
//	cq, _ := dev.CreateCQ(256)
//	qp, _ := pd.CreateQP(vrdma.QPInitAttr{Type: vrdma.RC, SendCQ: cq, RecvCQ: cq,
//		Cap: vrdma.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 4, MaxRecvSGE: 4}})
//	_ = qp.Connect(remote, vrdma.ConnectOptions{}) // RESET -> INIT -> RTR -> RTS
//	_ = qp.PostSend([]vrdma.SendWR{{ID: 1, Opcode: vrdma.WRRDMAWrite, Flags: vrdma.SendSignaled,
//		SGL: []vrdma.SGE{mr.SGE(0, 4096)}, RemoteAddr: raddr, RKey: rkey}})
//	wc := make([]vrdma.WorkCompletion, 16)
//	_ = cq.Wait(ctx)
//	n, _ := cq.Poll(wc)
//
// Memory regions are allocated by the registration (AllocMR): their memory
// is a sealed memfd shared with the daemon and locked in RAM, so the daemon
// can reach it without ptrace rights or copies through the kernel.
//
// Admin manages the daemon: instances, links, the distributed switch. An
// instance belongs to the user who creates it (or the owner root names):
// only the owner and root may attach to it, delete it or put it in a trust
// group; other users get ErrPermission. Every user and instance has
// limits on what it holds, which Device.Query reports (MaxQP, MaxCQ, ...);
// one more fails with ErrLimit.
//
// Names follow ibverbs: an ibverbs user finds IBV_WR_RDMA_WRITE as
// WRRDMAWrite, IBV_WC_REM_ACCESS_ERR as WCRemAccessErr, ibv_modify_qp as
// QP.Modify with a QPAttr and a mask. Errors are typed values that
// errors.Is and errors.As match (ErrNotFound, ErrInvalidState,
// *MemlockError, *WCError, ...).
//
// When the daemon goes away (or reports DEVICE_FATAL) the device is lost,
// as a hardware device that resets: an EventDeviceFatal arrives, QPs read
// as ERR, posts fail with an error matching ErrDeviceFatal, Poll returns
// the completions still in its ring and then that error, Wait and PollWait
// return it at once (waits already asleep are woken), every other verb that
// needs the daemon fails with it, and destroying objects succeeds so that a
// program can clean up. Nothing spins or waits for a daemon that is gone.
package vrdma
