// Package pathsel chooses how two adapters reach each other — memcpy on
// the same host; the hosts' own RDMA devices (verbs) for adapters whose
// instances are bound to verbs uplinks that match and whose daemons carry
// what the QPs ask (DeviceFeatures); rdma (vrdma's software RoCEv2) when
// both hosts have an active rxe uplink on the adapters' port group, or
// between an unbound adapter and a bound one on a RoCE v2 device; a TCP
// channel otherwise — as a pure function of their records and what the
// QPs ask, the same whichever end asks, with the reason in words (what
// `vrdma path A B` prints), or no path and why.
package pathsel
