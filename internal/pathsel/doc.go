// Package pathsel chooses how two adapters reach each other — memcpy on
// the same host, rdma when both hosts have an active RDMA uplink on the
// adapters' port group, a TCP channel otherwise — as a pure function of
// their records, the same whichever end asks, with the reason in words
// (what `vrdma path A B` prints).
package pathsel
