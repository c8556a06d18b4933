package engine

import (
	"net/netip"
	"testing"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/wire"
)

// stubLink is a Link that carries nothing: the test hands its frames to
// the host itself.
type stubLink struct {
	gid    [16]byte
	intact bool
}

func (l *stubLink) Name() string                       { return "stub0" }
func (l *stubLink) GIDs() [][16]byte                   { return [][16]byte{l.gid} }
func (l *stubLink) ActiveMTU() abi.MTU                 { return abi.MTU4096 }
func (l *stubLink) WriteBatch(f [][]byte) (int, error) { return len(f), nil }
func (l *stubLink) Serve(func([]byte)) error           { return nil }
func (l *stubLink) Close() error                       { return nil }
func (l *stubLink) FramesIntact() bool                 { return l.intact }

// A frame whose ICRC is wrong is counted and dropped, unless its link
// vouches for its frames (IntactLink): then the ICRC is not checked and the
// frame goes on (here to the unknown-QP counter).
func TestIntactLinkSkipsICRC(t *testing.T) {
	dst := netip.MustParseAddr("10.47.0.2")
	p := wire.Packet{Src: netip.MustParseAddr("10.47.0.1"), Dst: dst, TTL: 64, IPID: 1, SrcPort: 0xc000,
		Opcode: wire.TransportRC | wire.OpSendOnly, PKey: wire.DefaultPKey, DestQP: 0xabcdef, Payload: []byte("hello")}
	frame := wire.Append(nil, &p)
	frame[len(frame)-1] ^= 0x40 // the ICRC's last byte
	for _, tt := range []struct {
		name                   string
		intact                 bool
		wantICRC, wantUnknownQ uint64
	}{
		{"plain link", false, 1, 0},
		{"intact link", true, 0, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := NewHost()
			t.Cleanup(h.Close)
			l := &stubLink{gid: dst.As16(), intact: tt.intact}
			if err := h.AddLink(l); err != nil {
				t.Fatal(err)
			}
			h.Deliver(l, frame)
			s := h.WireStats(l.Name())
			if s.ICRC != tt.wantICRC || s.UnknownQP != tt.wantUnknownQ {
				t.Fatalf("ICRC errors %d, unknown QP %d: want %d and %d", s.ICRC, s.UnknownQP, tt.wantICRC, tt.wantUnknownQ)
			}
		})
	}
}
