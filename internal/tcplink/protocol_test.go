package tcplink

import (
	"bytes"
	"errors"
	"io"
	"net/netip"
	"testing"

	"github.com/vrdma/vrdma/internal/wire"
)

func TestHelloRoundTrip(t *testing.T) {
	h := hello{id: [16]byte{1, 2, 3, 15: 16}, nonce: 0x0102030405060708,
		gids: [][16]byte{netip.MustParseAddr("::ffff:10.0.0.1").As16(), netip.MustParseAddr("fd00::1").As16()}}
	b := appendHello(nil, &h)
	want := "vRtc\x01\x00\x00\x02" + string(h.id[:]) + "\x01\x02\x03\x04\x05\x06\x07\x08" + string(h.gids[0][:]) + string(h.gids[1][:])
	if string(b) != want {
		t.Fatalf("hello % x\nwant  % x", b, want)
	}
	var got hello
	n, err := parseHelloFixed(b, &got)
	if err != nil || n != 2 {
		t.Fatalf("parseHelloFixed = %d, %v", n, err)
	}
	parseHelloGIDs(b[helloFixedLen:], &got)
	if got.id != h.id || got.nonce != h.nonce || len(got.gids) != 2 || got.gids[0] != h.gids[0] || got.gids[1] != h.gids[1] {
		t.Fatalf("parsed %+v, want %+v", got, h)
	}
}

func TestFrameDst(t *testing.T) {
	v4 := testFrame(addrA, addrB, 1, []byte("x"))
	v6 := testFrame(netip.MustParseAddr("fd00::1"), netip.MustParseAddr("fd00::2"), 1, []byte("x"))
	mapped := bytes.Clone(v6)
	copy(mapped[24:40], netip.MustParseAddr("::ffff:10.1.2.3").AsSlice())
	group := testFrame(addrA, netip.MustParseAddr("239.1.2.3"), 1, []byte("x"))
	tagged := append(wire.AppendGroupTag(nil, "uid 1000"), group...)
	tests := []struct {
		name  string
		frame []byte
		dst   string // "" for a bad frame
	}{
		{"IPv4", v4, "127.0.0.2"},
		{"IPv6", v6, "fd00::2"},
		{"IPv6 to a mapped address", mapped, "10.1.2.3"},
		{"empty", nil, ""},
		{"IPv4 short", v4[:19], ""},
		{"IPv4 IHL too small", append([]byte{0x44}, v4[1:]...), ""},
		{"IPv4 IHL beyond the frame", append([]byte{0x4f}, v4[1:24]...), ""},
		{"IPv4 longer than its header says", append(bytes.Clone(v4), 0), ""},
		{"IPv6 short", v6[:39], ""},
		{"IPv6 longer than its header says", append(bytes.Clone(v6), 0), ""},
		{"version 5", append([]byte{0x55}, v4[1:]...), ""},
		{"group-tagged to a group", tagged, "239.1.2.3"},
		{"group-tagged to a unicast address", append(wire.AppendGroupTag(nil, "uid 1000"), v4...), ""},
		{"group tag alone", wire.AppendGroupTag(nil, "uid 1000"), ""},
		{"group tag cut short", tagged[:5], ""},
		{"group tag, datagram cut short", tagged[:len(tagged)-1], ""},
		{"group tag of no tenant", append([]byte{wire.GroupTagKind, 0}, group...), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, why := frameDst(tt.frame)
			if tt.dst == "" {
				if why == "" {
					t.Fatalf("frameDst accepted the frame (dst %v)", d)
				}
				t.Log(why)
				return
			}
			if why != "" || d != netip.MustParseAddr(tt.dst) {
				t.Fatalf("frameDst = %v, %q; want %s", d, why, tt.dst)
			}
		})
	}
}

func TestFrameReader(t *testing.T) {
	f := testFrame(addrA, addrB, 1, []byte("payload"))
	framed := cat(u32(uint32(len(f))), f)
	tests := []struct {
		name   string
		stream []byte
		frames int   // frames (keepalives included) before the end
		err    error // how it ends
	}{
		{"nothing", nil, 0, io.EOF},
		{"one frame", framed, 1, io.EOF},
		{"keepalive, frame, keepalive", cat(u32(0), framed, u32(0)), 3, io.EOF},
		{"many", bytes.Repeat(framed, 1000), 1000, io.EOF},
		{"cut in the length", cat(framed, []byte{0, 0, 0}), 1, ErrProtocol},
		{"cut in the frame", cat(framed, framed[:20]), 1, ErrProtocol},
		{"oversized", cat(framed, u32(MaxFrame+1), make([]byte, MaxFrame+1)), 1, ErrProtocol},
		{"largest length, bad bytes", cat(u32(MaxFrame), make([]byte, MaxFrame)), 0, ErrProtocol},
		{"not IP", cat(u32(3), []byte{1, 2, 3}), 0, ErrProtocol},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newFrameReader(bytes.NewReader(tt.stream))
			n := 0
			for {
				got, err := r.next()
				if err != nil {
					if n != tt.frames || !errors.Is(err, tt.err) {
						t.Fatalf("after %d frames: %v; want %d frames, then %v", n, err, tt.frames, tt.err)
					}
					return
				}
				if len(got) > 0 && !bytes.Equal(got, f) {
					t.Fatalf("frame %d: % x", n, got)
				}
				n++
			}
		})
	}
}

// FuzzHello: no bytes make the hello parser panic, and what it accepts
// encodes back to the same bytes.
func FuzzHello(f *testing.F) {
	f.Add(appendHello(nil, &hello{gids: [][16]byte{{1}}}))
	f.Add(rawHello(1, 0, 65, 65))
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n0123456789abcdef"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < helloFixedLen {
			if err := helloPrefixErr(b); err != nil && !errors.Is(err, ErrProtocol) {
				t.Fatalf("error %v does not match ErrProtocol", err)
			}
			return
		}
		var h hello
		n, err := parseHelloFixed(b, &h)
		if err != nil {
			if !errors.Is(err, ErrProtocol) {
				t.Fatalf("error %v does not match ErrProtocol", err)
			}
			return
		}
		if len(b) < helloFixedLen+16*n {
			return
		}
		parseHelloGIDs(b[helloFixedLen:helloFixedLen+16*n], &h)
		if re := appendHello(nil, &h); !bytes.Equal(re, b[:len(re)]) {
			t.Fatalf("re-encoded % x\nfrom      % x", re, b)
		}
	})
}

// FuzzFrameReader: no byte stream makes the frame reader panic or return
// a frame that is not a whole IP packet within MaxFrame; it ends with
// io.EOF or a protocol error.
func FuzzFrameReader(f *testing.F) {
	fr := testFrame(addrA, addrB, 1, []byte("payload"))
	f.Add(cat(u32(uint32(len(fr))), fr, u32(0)))
	f.Add(cat(u32(0xffffffff)))
	f.Add(cat(u32(uint32(len(fr))), fr[:10]))
	f.Fuzz(func(t *testing.T, stream []byte) {
		r := newFrameReader(bytes.NewReader(stream))
		total := 0
		for {
			got, err := r.next()
			if err != nil {
				if !errors.Is(err, io.EOF) && !errors.Is(err, ErrProtocol) {
					t.Fatalf("ended with %v", err)
				}
				if errors.Is(err, io.EOF) && total != len(stream) {
					t.Fatalf("EOF after %d of %d bytes", total, len(stream))
				}
				return
			}
			total += frameHeaderLen + len(got)
			if len(got) > MaxFrame {
				t.Fatalf("a frame of %d bytes", len(got))
			}
			if _, why := frameDst(got); len(got) > 0 && why != "" {
				t.Fatalf("a bad frame came out: %s", why)
			}
		}
	})
}

// TestFrameSourceOfTaggedFrames: the source a peer is checked against
// (announced) is the datagram's, after a group tag; a tag that does not
// split has none, so its frame is dropped as spoofed.
func TestFrameSourceOfTaggedFrames(t *testing.T) {
	group := testFrame(addrA, netip.MustParseAddr("239.1.2.3"), 1, []byte("x"))
	tagged := append(wire.AppendGroupTag(nil, "uid 1000"), group...)
	if got := frameSource(tagged); got != addrA {
		t.Errorf("the source of a tagged frame is %v, want its datagram's, %v", got, addrA)
	}
	if got := frameSource(append([]byte{wire.GroupTagKind, 0}, group...)); got.IsValid() {
		t.Errorf("a frame whose tag does not split has source %v, want none", got)
	}
}
