// Package transport is the InfiniBand transport of one queue pair (RC, UC
// or UD) as a pure state machine: the requester that turns work requests
// into packets, the completer that turns ACKs, NAKs and responses into
// completions, and the responder that executes requests and answers them.
//
// It does no I/O and has no clock. It is driven by three inputs — Post (a
// work request), Receive (a packet addressed to the QP) and Tick (the time
// now) — and acts through an Env, which sends packets, resolves memory
// keys and posts completions. The same inputs always give the same
// outputs, so tests drive two QPs over a simulated network with loss,
// duplication and reordering, deterministically.
//
// The rules are IBTA's (volume 1, chapter 9) with Linux rdma_rxe as the
// tie-breaker for what the standard leaves open: AckReq on the last packet
// of each message, one ACK per AckReq, one sequence-error NAK per gap,
// go-back-N retry, retry_cnt and rnr_retry of 7 meaning for ever.
package transport
