package abi

// A QP's shared region begins with its send queue's ring. The ring header's
// spare words carry what the library needs to know about the QP itself:
//
//	offset 140  state      (u32, QPState; written only by the daemon, on
//	            every state change, and never read back by it)
//	offset 144  done index (u32, written only by the daemon: every send
//	            request before it has its completion, if it asked for one,
//	            in the completion queue; the consumer index may run ahead
//	            of it, since a slot is free before its completion is seen)
//	offset 148  revoke generation (u32, written only by the daemon: bumped
//	            when a peer region this QP mapped for the direct path is
//	            deregistered; the library drops its mappings when it changes)
//	offset 192  direct busy (u32, written only by the library: non-zero
//	            while a direct-path operation may touch a peer mapping; on
//	            a cache line of its own, away from the daemon's words)
//
// The daemon trusts nothing it reads here: the busy word only bounds how
// long a deregistration waits (docs/design/trusted-direct-path.md).
const (
	QPStateOff      = 140
	SQDoneOff       = 144
	QPRevokeOff     = 148
	QPDirectBusyOff = 192
)
