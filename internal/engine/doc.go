// Package engine executes work requests. It holds the data-plane objects of
// every adapter on the host (memory regions, completion queues, receive
// queues, queue pairs) and runs each queue pair's send queue: on the same
// host every request is a series of checks (keys, bounds, access flags,
// protection domains, states) followed by one copy between the two
// registered regions, with no staging buffer.
//
// A queue pair's send queue is consumed by exactly one goroutine at a time:
// its own worker, which sleeps on the QP's doorbell, or, for adapters in
// async mode, the adapter's poller, which spins over all its QPs on a
// dedicated thread. The responder side of an operation (the target's
// receive queue, completion queue and memory) is touched under that
// object's own lock or reference, so workers of different QPs run in
// parallel.
//
// Everything read from shared memory is copied out once and validated
// before use; a client that scribbles on its rings gets error completions
// or a QP in the error state, never a daemon crash.
package engine
