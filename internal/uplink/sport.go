package uplink

// The UDP source ports rxe chooses. Receivers, rxe included, accept any
// source port; the port only spreads flows over ECMP paths and NIC queues.
// Matching rxe keeps captures comparable.

// sportBase is the bottom of the RoCEv2 source-port range 0xC000-0xFFFF
// (rxe.h RXE_ROCE_V2_SPORT, IB_ROCE_UDP_ENCAP_VALID_PORT_MIN).
const sportBase = 0xC000

// SourcePort returns the UDP source port of an RC or UC QP: derived from
// the flow label of its address vector, or, when that is 0 (the usual case:
// ibv_*_pingpong and perftest leave it 0), from the two QP numbers, so both
// ends of a connection use the same port (ib_verbs.h rdma_calc_flow_label,
// rdma_flow_label_to_udp_sport).
func SourcePort(lqpn, rqpn uint32, flowLabel uint32) uint16 {
	fl := flowLabel & 0xFFFFF
	if fl == 0 {
		v := uint64(lqpn) * uint64(rqpn)
		v ^= v >> 20
		v ^= v >> 40
		fl = uint32(v & 0xFFFFF)
	}
	return uint16((fl&0x3FFF)^((fl&0xFC000)>>14)) | sportBase
}

// goldenRatio32 is the multiplier of the kernel's hash_32.
const goldenRatio32 = 0x61C88647

// UDSourcePort returns the UDP source port of a UD QP, QP1 included: the
// 14-bit hash_32 of its number above 0xC000, fixed when the QP is created
// (rxe_qp.c rxe_qp_init_req).
func UDSourcePort(qpn uint32) uint16 {
	return sportBase + uint16((qpn*goldenRatio32)>>(32-14))
}
