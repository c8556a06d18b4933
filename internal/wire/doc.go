// Package wire encodes and decodes RoCEv2 packets: the IPv4 or IPv6 header,
// UDP (port 4791), the InfiniBand Base Transport Header and the extended
// transport headers RC, UC and UD use, the payload, its pad and the
// invariant CRC (ICRC), byte for byte as Linux rdma_rxe and RoCE NICs put
// them on the wire.
//
// Decoding fills a caller-owned Packet whose Payload aliases the input;
// encoding appends to a caller-owned buffer. Neither allocates.
package wire
