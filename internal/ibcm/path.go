package ibcm

import "encoding/binary"

// Path is a REQ's description of a path (primary or alternate): on RoCE the
// GIDs carry the addresses (IPv4 as ::ffff:a.b.c.d) and the LIDs are 0xffff.
type Path struct {
	LocalLID, RemoteLID uint16
	LocalGID, RemoteGID [16]byte
	FlowLabel           uint32 // 20 bits; on RoCEv2 it picks the UDP source port
	PacketRate          uint8  // 6 bits
	TrafficClass        uint8
	HopLimit            uint8
	SL                  uint8 // 4 bits
	SubnetLocal         bool
	LocalACKTimeout     uint8 // 5 bits
}

func parsePath(b []byte) Path {
	w := binary.BigEndian.Uint32(b[36:40])
	p := Path{
		LocalLID: binary.BigEndian.Uint16(b[0:2]), RemoteLID: binary.BigEndian.Uint16(b[2:4]),
		FlowLabel: w >> 12, PacketRate: uint8(w & 0x3f),
		TrafficClass: b[40], HopLimit: b[41], SL: b[42] >> 4, SubnetLocal: b[42]&0x08 != 0,
		LocalACKTimeout: b[43] >> 3,
	}
	copy(p.LocalGID[:], b[4:20])
	copy(p.RemoteGID[:], b[20:36])
	return p
}

func (p *Path) put(b []byte) {
	binary.BigEndian.PutUint16(b[0:2], p.LocalLID)
	binary.BigEndian.PutUint16(b[2:4], p.RemoteLID)
	copy(b[4:20], p.LocalGID[:])
	copy(b[20:36], p.RemoteGID[:])
	binary.BigEndian.PutUint32(b[36:40], p.FlowLabel&0xfffff<<12|uint32(p.PacketRate&0x3f))
	b[40], b[41] = p.TrafficClass, p.HopLimit
	b[42] = p.SL & 0xf << 4
	if p.SubnetLocal {
		b[42] |= 0x08
	}
	b[43] = p.LocalACKTimeout & 0x1f << 3
}
