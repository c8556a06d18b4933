// Package ibv is the verbs vocabulary of vrdma's API: the enumerations and
// records of rdma-core's <infiniband/verbs.h> that a program names when it
// posts work, reads completions and moves queue pairs through their states
// — work request and completion opcodes (IBV_WR_*, IBV_WC_*), completion
// statuses, access and send flags, QP types and states, asynchronous event
// types, MTUs, QP and address-handle attributes with their attribute mask,
// and the scatter/gather element.
//
// The values are libibverbs' own, so a number in a log or on the wire means
// what it means to anyone who knows ibverbs, and the names drop the IBV_
// prefix: IBV_WC_SUCCESS is WCSuccess, IBV_QPT_RC is RC, IBV_QP_STATE is
// AttrState. Package vrdma (the module's root) takes and returns these
// types, and the daemon and its engine use the same definitions.
package ibv
