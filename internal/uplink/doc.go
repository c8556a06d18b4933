// Package uplink is vrdma's Soft-RoCE link: RoCEv2 (UDP 4791) on one host
// interface, byte-compatible with Linux's rdma_rxe. A Link implements
// engine.Link: it sends whole IPv4 and IPv6 packets as package wire encodes
// them, delivers whole IP packets it receives, and keeps the interface's GID
// table as addresses come and go.
//
// Every byte the ICRC covers must reach the wire and the engine as the peer
// sent it, the IPv4 Identification included, which ordinary UDP sockets
// neither let a sender choose nor show a receiver. So a link sends through
// raw IP sockets with the header included (IP_HDRINCL, IPv6 IPPROTO_RAW) and
// receives through raw IPPROTO_UDP sockets with a classic BPF filter on the
// destination port; one UDP socket bound to each of the interface's
// addresses holds the port, so that the kernel answers no packet with an
// ICMP port-unreachable and nothing else can take the port, and drops
// everything through a drop-all filter. docs/design/receive-path.md tells
// why and what it costs.
//
// Sending and receiving use sendmmsg and recvmmsg on preallocated buffers:
// no allocation per packet. It needs CAP_NET_RAW.
//
//	l, err := uplink.Open(uplink.Config{Name: "rxe0", Netdev: "eth0"})
//	if err != nil { ... }
//	go l.Serve(func(frame []byte) { /* a whole IPv4 or IPv6 packet */ })
//	n, err := l.WriteBatch(frames)
//	...
//	l.Close()
package uplink
