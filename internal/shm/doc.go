// Package shm holds the operating-system pieces that the client library and
// the daemon share: sealed memfd regions mapped into both processes, locked in
// RAM, doorbells (pipes whose ends each side holds as its own open file description), and atomic access to words inside shared mappings.
//
// All unsafe pointer arithmetic of the project lives in atomic_unsafe.go.
//
//	r, err := shm.NewRegion("vrdma-mr", 1<<20) // sealed memfd, mapped read-write
//	defer r.Close()
//	if err := r.Lock(); err != nil { ... }     // *MemlockError says how to raise the limit
//	fd := r.FD()                               // pass to the peer with SCM_RIGHTS
package shm
