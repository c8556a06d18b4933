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
// A program opens a device (Open; VRDMA_INSTANCE picks the instance),
// allocates a protection domain, registers memory, creates completion
// queues and queue pairs, connects its queue pairs to a peer's, posts work
// requests and polls their completions. The package's examples do all of
// it against a daemon they start, and `go test` runs them and checks what
// they print (pkg.go.dev shows them; in a clone, example_test.go and
// example_verbs_test.go):
//
//   - the package example: a server lends a region; a client connects with
//     the connection manager ([Device.Listen], [Device.Dial]), learns the
//     region's address and rkey from the server's reply, RDMA WRITEs into
//     it and SENDs a message the server receives;
//   - [QP.Connect]: the same connection made by hand, the two sides
//     exchanging their endpoints ([Endpoint]) as ibv_rc_pingpong does;
//   - [CQ.Wait]: sleeping until completions arrive, then polling them;
//   - [DefaultConnectOptions]: the options Connect takes (nil means the
//     defaults; the zero ConnectOptions lets the peer do nothing).
//
// The verbs vocabulary — opcodes, completion statuses, access and send
// flags, QP types and states, QP and address-handle attributes, the
// scatter/gather element — is package [github.com/vrdma/vrdma/ibv], with
// libibverbs' values under its names less the IBV_ prefix (ibv.RC,
// ibv.WCSuccess, ibv.AttrState).
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
