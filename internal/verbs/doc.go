// Package verbs drives a device of the host's own rdma-core (mlx5,
// rdma_rxe, siw, ...) for a verbs uplink (`vrdma link add NAME type verbs
// dev IBDEV`). The daemon stays one pure-Go binary: a small C helper,
// built at run time with the system compiler against rdma-core's headers
// and linked with the host's libibverbs.so.1, opens the device and answers
// the daemon over a SOCK_SEQPACKET unix socket. See
// docs/design/verbs-uplink.md.
//
// The helper's replies are read as untrusted input (msg.go): a helper that
// dies, lies or sends garbage fails the device with a typed error, never
// the daemon.
package verbs
