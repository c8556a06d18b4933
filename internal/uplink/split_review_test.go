package uplink

import (
	"bytes"
	"net/netip"
	"testing"
)

// A run whose payload data holds, every 272 bytes, what looks like the BTH
// of the next PSN to the same QP chains at MTU 256 as well as at its own
// MTU. The data is the application's: whatever it is, the run must come
// back as the packets that were sent, each with an ICRC that verifies, or
// the same bytes are resent and lost for ever.
func TestSplitSizeIgnoresBTHsInPayloadData(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		src, dst := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
		hl := 20
		if v6 {
			src, dst, hl = netip.MustParseAddr("fd00::1"), netip.MustParseAddr("fd00::2"), 40
		}
		const qpn, psn, mtu = 0x55, 10, 1024
		const s = 12 + mtu + 4 // each packet's UDP payload: BTH, data, ICRC
		data := make([][]byte, 3)
		for i := range data {
			data[i] = make([]byte, mtu)
			for j := range data[i] {
				data[i][j] = byte(j * 13)
			}
		}
		// Fake BTHs at every multiple of 272 of the buffer's UDP payload.
		for j := 1; 272*j < 3*s; j++ {
			off := 272 * j
			i, in := off/s, off%s-12
			if in < 0 || in+12 > mtu {
				t.Fatalf("offset %d lands in packet %d's headers", off, i)
			}
			q := data[i][in:]
			q[5], q[6], q[7] = byte(qpn>>16), byte(qpn>>8), byte(qpn)
			p := uint32(psn + j)
			q[9], q[10], q[11] = byte(p>>16), byte(p>>8), byte(p)
		}
		frames := [][]byte{
			rcFrame(src, dst, 1, 0xC000, 0x07, qpn, psn, data[0]),
			rcFrame(src, dst, 2, 0xC000, 0x07, qpn, psn+1, data[1]),
			rcFrame(src, dst, 3, 0xC000, 0x08, qpn, psn+2, data[2]),
		}
		bufs, runs := wireRuns(frames)
		if runs != 1 || len(bufs) != 1 {
			t.Fatalf("v6=%v: %d buffers, %d runs; want one run", v6, len(bufs), runs)
		}
		if seg := splitSize(bufs[0], hl); seg != s {
			t.Errorf("v6=%v: splitSize = %d, want %d", v6, seg, s)
		}
		got, _ := cut(bufs)
		if len(got) != len(frames) {
			t.Fatalf("v6=%v: the run came back as %d packets, want %d", v6, len(got), len(frames))
		}
		for i := range frames {
			if !bytes.Equal(normalized(got[i]), normalized(frames[i])) || !icrcOK(got[i]) {
				t.Fatalf("v6=%v: packet %d is not what was sent, or its ICRC fails", v6, i)
			}
		}
	}
}
