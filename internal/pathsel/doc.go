// Package pathsel chooses how two adapters reach each other — memcpy on
// the same host, the hosts' own RDMA devices (verbs) when both have a
// verbs uplink that matches the other's and both daemons can carry QPs on
// it, rdma (vrdma's software RoCEv2) when both hosts have an active rxe
// uplink on the adapters' port group, a TCP channel otherwise — as a pure
// function of their records and what the QPs ask, the same whichever end
// asks, with the reason in words (what `vrdma path A B` prints).
package pathsel
