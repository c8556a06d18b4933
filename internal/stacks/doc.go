// Package stacks runs the software people deploy over verbs, Debian's
// unmodified packages, on vrdma adapters through the guest library: UCX
// (ucx_info, ucx_perftest over rc_verbs, ud_verbs and UCX's own choice),
// Open MPI over UCX (pml ucx, osc ucx; under `vrdma run -- mpirun` and
// `mpirun ... vrdma run -- PROG`) and fio's rdma engine, on one host and
// between two network-namespace hosts over RoCEv2 and over the TCP
// channel.
//
// The package's code reads what those programs print (ParseUCXInfo,
// ParseUCXPerftest, ParseMPICheck, ParseFio); its tests run them. A
// representative subset runs by default (CI); the full matrix runs with
// `go test -tags stacks ./internal/stacks`. bench/stacks.sh measures the
// same programs for docs/perf.md. Each test skips, naming the Debian
// package to install, when a program is missing.
package stacks
