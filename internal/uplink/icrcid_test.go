package uplink

import (
	"encoding/binary"
	"net/netip"
	"testing"
)

// Rewriting the ICRC for a new Identification gives the ICRC computed from
// scratch, for every length and ID change.
func TestICRCIDDelta(t *testing.T) {
	src, dst := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	for _, n := range []int{0, 1, 3, 100, 1024, 4096, 8000} {
		f := testFrame4(src, dst, 0x1234, 0, 0xC000, 4791, make([]byte, n))
		for _, id := range []uint16{0, 1, 0x1235, 0xffff, 0x8000} {
			g := append([]byte(nil), f...)
			old := binary.LittleEndian.Uint32(g[len(g)-4:])
			binary.BigEndian.PutUint16(g[4:], id)
			got := old ^ icrcIDDelta(zeroBytesOp(len(g)-10), 0x1234^id)
			if want := testICRC(g); got != want {
				t.Errorf("payload %d, ID %#x: ICRC %08x, want %08x", n, id, got, want)
			}
		}
	}
}
