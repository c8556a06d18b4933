// Package ibcm is the wire format of the InfiniBand Communication Manager:
// the 256-byte management datagrams (MADs, management class 0x07) that
// rdma_cm peers — the kernel's rdma_cm on rdma_rxe, RoCE NICs — exchange
// as UD SENDs on QP1 to set up and tear down connections (IBTA Vol. 1
// ch. 12; REFERENCE.md §1.10), and the "IP CM" conventions rdma_cm layers
// on them: a service ID made of a port space and a port, and a private-data
// header with the IP addresses.
//
// It decodes and encodes only; the connection state machine is elsewhere.
// Parse functions take a MAD exactly as it came off the wire (untrusted:
// every length is checked, and they never panic), Append functions add
// one to a buffer; for every message Append(Parse(b)) gives b back.
package ibcm
