package verbs

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
)

func TestParseHeader(t *testing.T) {
	ok := AppendHeader(nil, OpOpen|OpReply, 7, 0, 4)
	ok = append(ok, 1, 2, 3, 4)
	flagged := append([]byte(nil), ok...)
	flagged[6] = 1
	tests := []struct {
		name string
		msg  []byte
		ok   bool
	}{
		{"whole", ok, true},
		{"short", ok[:HeaderSize-1], false},
		{"longer than it says", append(append([]byte(nil), ok...), 0), false},
		{"shorter than it says", ok[:HeaderSize+2], false},
		{"flags", flagged, false},
		{"over the limit", append(AppendHeader(nil, OpPing, 1, 0, MaxMessage), make([]byte, MaxMessage)...), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := ParseHeader(tt.msg)
			if tt.ok != (err == nil) {
				t.Fatalf("ParseHeader: %v, want ok=%v", err, tt.ok)
			}
			if err != nil {
				if !errors.Is(err, ErrProtocol) {
					t.Errorf("error %v is not ErrProtocol", err)
				}
				return
			}
			if h.Op() != OpOpen|OpReply || h.Seq() != 7 || h.Status() != 0 || h.Len() != uint32(len(tt.msg)) {
				t.Errorf("header %v: op %#x seq %d status %d len %d", []byte(h), h.Op(), h.Seq(), h.Status(), h.Len())
			}
		})
	}
}

func TestDeviceAttrRoundTrip(t *testing.T) {
	a := DeviceAttr{NodeGUID: 0x5054_00ff_fe47_9101, SysImageGUID: 1, VendorID: 0xffffff, PhysPortCnt: 1,
		MaxQP: 1 << 17, MaxQPWR: 1 << 14, MaxSGE: 32, MaxCQ: 1 << 16, MaxCQE: 1 << 15, MaxMR: 1 << 18,
		MaxMRSize: ^uint64(0), MaxPD: 1 << 16, AtomicCap: 1, NodeType: 1, Transport: TransportIB, FWVer: "0.0.0"}
	b := AppendDeviceAttr(nil, a)
	if len(b) != devAttrSize {
		t.Fatalf("encoded %d bytes, want %d", len(b), devAttrSize)
	}
	got, err := ParseDeviceAttr(b)
	if err != nil || got != a {
		t.Fatalf("ParseDeviceAttr = %+v, %v; want %+v", got, err, a)
	}
	bad := []struct {
		name string
		b    []byte
	}{
		{"short", b[:devAttrSize-1]},
		{"no ports", AppendDeviceAttr(nil, DeviceAttr{})},
		{"too many ports", AppendDeviceAttr(nil, DeviceAttr{PhysPortCnt: 256})},
		{"atomic capability 3", AppendDeviceAttr(nil, DeviceAttr{PhysPortCnt: 1, AtomicCap: 3})},
		{"transport 5", AppendDeviceAttr(nil, DeviceAttr{PhysPortCnt: 1, Transport: 5})},
		{"transport -2", AppendDeviceAttr(nil, DeviceAttr{PhysPortCnt: 1, Transport: -2})},
		{"negative max_sge", AppendDeviceAttr(nil, DeviceAttr{PhysPortCnt: 1, MaxSGE: -1})},
		{"negative max_qp_wr", AppendDeviceAttr(nil, DeviceAttr{PhysPortCnt: 1, MaxQPWR: -1})},
	}
	for _, tt := range bad {
		if _, err := ParseDeviceAttr(tt.b); !errors.Is(err, ErrProtocol) {
			t.Errorf("%s: ParseDeviceAttr err = %v, want ErrProtocol", tt.name, err)
		}
	}
	// Control characters in the firmware version do not reach logs.
	a.FWVer = "1\n2\x1b"
	if got, _ := ParseDeviceAttr(AppendDeviceAttr(nil, a)); got.FWVer != "1?2?" {
		t.Errorf("FWVer %q, want %q", got.FWVer, "1?2?")
	}
}

func TestPortAttrRoundTrip(t *testing.T) {
	g := GIDEntry{Index: 1, Type: GIDTypeRoCEv2, Ifindex: 2}
	copy(g.GID[10:], []byte{0xff, 0xff, 10, 47, 91, 1})
	p := PortAttr{State: 4, PhysState: 5, MaxMTU: 5, ActiveMTU: 3, LinkLayer: LinkLayerEthernet, GIDTableLen: 512,
		GIDs: []GIDEntry{{Index: 0, Type: GIDTypeRoCEv2, Ifindex: 2, GID: [16]byte{0xfe, 0x80, 15: 1}}, g}}
	got, err := ParsePortAttr(AppendPortAttr(nil, p))
	if err != nil || !reflect.DeepEqual(got, p) {
		t.Fatalf("ParsePortAttr = %+v, %v; want %+v", got, err, p)
	}
	with := func(f func(*PortAttr)) []byte {
		q := p
		q.GIDs = append([]GIDEntry(nil), p.GIDs...)
		f(&q)
		return AppendPortAttr(nil, q)
	}
	enc := AppendPortAttr(nil, p)
	bad := []struct {
		name string
		b    []byte
	}{
		{"short", enc[:portAttrSize-1]},
		{"truncated GID", enc[:len(enc)-1]},
		{"extra bytes", append(append([]byte(nil), enc...), 0)},
		{"count beyond the body", func() []byte { b := append([]byte(nil), enc...); ne.PutUint32(b[36:], 3); return b }()},
		{"too many GIDs", func() []byte { b := append([]byte(nil), enc...); ne.PutUint32(b[36:], MaxGIDs+1); return b }()},
		{"bad MTU", with(func(q *PortAttr) { q.ActiveMTU = 6 })},
		{"bad link layer", with(func(q *PortAttr) { q.LinkLayer = 3 })},
		{"bad GID type", with(func(q *PortAttr) { q.GIDs[1].Type = 3 })},
		{"GID index past the table", with(func(q *PortAttr) { q.GIDs[1].Index = 512 })},
		{"LID over 16 bits", with(func(q *PortAttr) { q.LID = 1 << 16 })},
	}
	for _, tt := range bad {
		if _, err := ParsePortAttr(tt.b); !errors.Is(err, ErrProtocol) {
			t.Errorf("%s: ParsePortAttr err = %v, want ErrProtocol", tt.name, err)
		}
	}
}

// FuzzParse feeds the decoders of the helper's replies anything: they
// return a value or an ErrProtocol error, never panic, and what they accept
// encodes back to the same bytes.
func FuzzParse(f *testing.F) {
	f.Add(AppendPortAttr(nil, PortAttr{ActiveMTU: 3, LinkLayer: 2, GIDs: []GIDEntry{{Type: 2}}}))
	f.Add(AppendDeviceAttr(nil, DeviceAttr{PhysPortCnt: 1}))
	f.Add(AppendDeviceAttr(nil, DeviceAttr{PhysPortCnt: 1, MaxSGE: 6, Transport: TransportIWARP, AtomicCap: AtomicNone}))
	f.Add(AppendPortAttr(nil, PortAttr{State: 4, ActiveMTU: 5, LinkLayer: LinkLayerInfiniBand, LID: 3, SMLID: 1, GIDs: []GIDEntry{{GID: [16]byte{0xfe, 0x80, 15: 1}}}}))
	f.Add(AppendHeader(nil, OpHello, 0, 0, 0))
	f.Add(AppendWCs(nil, []WC{{WRID: 1, Opcode: WCRecv, ByteLen: 3000, QPN: 0x11}, {Status: WCRemAccessErr}}))
	f.Add(ne.AppendUint32(ne.AppendUint32(nil, 0), 64))
	f.Add(AppendWCs(nil, []WC{{WRID: 2, Opcode: WCRecv, ByteLen: 40 + 1024, QPN: 0x11, SrcQP: 0x12, Flags: WCFlagGRH, SLID: 7, SL: 3}}))
	f.Add(ne.AppendUint32(ne.AppendUint32(nil, 5), 0))
	f.Add(AppendAsyncEvent(nil, AsyncEvent{Type: EventQPFatal, Element: 3, QPN: 0x11}))
	f.Add(AppendAsyncEvent(nil, AsyncEvent{Type: EventDeviceFatal}))
	f.Add(AppendCMEvent(nil, CMEvent{ID: 2, Listener: 1, Event: CMConnectRequest, QPN: 0x11, PrivateData: []byte("pd")}))
	f.Add(AppendCMQPAttrReply(nil, 0x1f, QPAttr{State: QPStateRTR, PathMTU: 3, IsGlobal: true}))
	f.Add(AppendSRQ(nil, SRQ{Handle: 1, Attr: SRQAttr{MaxWR: 64, MaxSGE: 1, Limit: 8}}))
	f.Add(AppendSRQAttr(nil, SRQAttr{MaxWR: 64, MaxSGE: 2, Limit: 10}))
	f.Add(AppendCMUDEvent(nil, CMEvent{ID: 3, Listener: CMNone, Event: CMEstablished, UD: &CMUD{QPN: 0x12, QKey: RDMAUDPQKey,
		AH: AHAttr{DGID: [16]byte{10: 0xff, 11: 0xff, 12: 10}, SGIDIndex: 1, HopLimit: 64, IsGlobal: true}, Port: 1}, PrivateData: []byte("rep")}))
	f.Fuzz(func(t *testing.T, b []byte) {
		if e, err := ParseCMUDEvent(b); err == nil {
			if got := AppendCMUDEvent(nil, e); string(got) != string(b) {
				t.Fatalf("UD CM event does not round-trip")
			}
		} else if !errors.Is(err, ErrProtocol) {
			t.Fatalf("ParseCMUDEvent: %v is not ErrProtocol", err)
		}
		if e, err := ParseCMEvent(b); err == nil {
			if got := AppendCMEvent(nil, e); string(got) != string(b) {
				t.Fatalf("CM event does not round-trip")
			}
		} else if !errors.Is(err, ErrProtocol) {
			t.Fatalf("ParseCMEvent: %v is not ErrProtocol", err)
		}
		for s := uint32(QPStateInit); s <= QPStateRTS; s++ {
			if a, m, err := ParseCMQPAttr(b, s); err == nil {
				if got := AppendCMQPAttrReply(nil, m, a); string(got) != string(b) {
					t.Fatalf("CM QP attributes do not round-trip")
				}
			} else if !errors.Is(err, ErrProtocol) {
				t.Fatalf("ParseCMQPAttr: %v is not ErrProtocol", err)
			}
		}
		if _, _, err := ParseCMID(b, len(b) == 8); err != nil && !errors.Is(err, ErrProtocol) {
			t.Fatalf("ParseCMID: %v is not ErrProtocol", err)
		}
		if _, err := ParseHeader(b); err != nil && !errors.Is(err, ErrProtocol) {
			t.Fatalf("ParseHeader: %v is not ErrProtocol", err)
		}
		if p, err := ParsePortAttr(b); err == nil {
			if got := AppendPortAttr(nil, p); string(got) != string(b) {
				t.Fatalf("port attributes do not round-trip")
			}
		} else if !errors.Is(err, ErrProtocol) {
			t.Fatalf("ParsePortAttr: %v is not ErrProtocol", err)
		}
		if a, err := ParseDeviceAttr(b); err != nil && !errors.Is(err, ErrProtocol) {
			t.Fatalf("ParseDeviceAttr: %v is not ErrProtocol", err)
		} else if err == nil && (a.AtomicCap > AtomicGlobal || a.MaxSGE < 0 || TransportName(a.Transport) == fmt.Sprintf("transport %d", a.Transport)) {
			t.Fatalf("ParseDeviceAttr took %+v", a)
		}
		if _, err := ParseMR(b); err != nil && !errors.Is(err, ErrProtocol) {
			t.Fatalf("ParseMR: %v is not ErrProtocol", err)
		}
		if _, err := ParseCQ(b, 16); err != nil && !errors.Is(err, ErrProtocol) {
			t.Fatalf("ParseCQ: %v is not ErrProtocol", err)
		}
		if _, err := ParseAH(b); err != nil && !errors.Is(err, ErrProtocol) {
			t.Fatalf("ParseAH: %v is not ErrProtocol", err)
		}
		if _, err := ParseQP(b, QPCap{MaxSendWR: 1}); err != nil && !errors.Is(err, ErrProtocol) {
			t.Fatalf("ParseQP: %v is not ErrProtocol", err)
		}
		if e, err := ParseAsyncEvent(b); err == nil {
			if got := AppendAsyncEvent(nil, e); string(got) != string(b) {
				t.Fatalf("async event does not round-trip")
			}
		} else if !errors.Is(err, ErrProtocol) {
			t.Fatalf("ParseAsyncEvent: %v is not ErrProtocol", err)
		}
		if q, err := ParseSRQ(b, SRQAttr{MaxWR: 4, MaxSGE: 1}); err == nil {
			if q.Attr.MaxWR < 4 || q.Attr.Limit > q.Attr.MaxWR || string(AppendSRQ(nil, q)) != string(b) {
				t.Fatalf("ParseSRQ took %+v", q)
			}
		} else if !errors.Is(err, ErrProtocol) {
			t.Fatalf("ParseSRQ: %v is not ErrProtocol", err)
		}
		if a, err := ParseSRQAttr(b); err == nil {
			if a.Limit > a.MaxWR || string(AppendSRQAttr(nil, a)) != string(b) {
				t.Fatalf("ParseSRQAttr took %+v", a)
			}
		} else if !errors.Is(err, ErrProtocol) {
			t.Fatalf("ParseSRQAttr: %v is not ErrProtocol", err)
		}
		var wcs [4]WC
		if _, _, err := parsePush(b, wcs[:]); err != nil && !errors.Is(err, ErrProtocol) {
			t.Fatalf("parsePush: %v is not ErrProtocol", err)
		}
		if n, err := ParseWCs(b, wcs[:]); err == nil {
			if got := AppendWCs(nil, wcs[:n]); string(got) != string(b) {
				t.Fatalf("completions do not round-trip")
			}
		} else if !errors.Is(err, ErrProtocol) {
			t.Fatalf("ParseWCs: %v is not ErrProtocol", err)
		}
	})
}

func TestParseMR(t *testing.T) {
	b := ne.AppendUint32(ne.AppendUint32(ne.AppendUint32(ne.AppendUint32(nil, 3), 0x100), 0x200), 0)
	b = ne.AppendUint64(b, 0x7f0000001000)
	m, err := ParseMR(b)
	if err != nil || m != (MR{Handle: 3, LKey: 0x100, RKey: 0x200, Addr: 0x7f0000001000}) {
		t.Fatalf("ParseMR = %+v, %v", m, err)
	}
	for name, bad := range map[string][]byte{"short": b[:mrSize-1], "padding": append(append([]byte(nil), b[:12]...), append([]byte{1, 0, 0, 0}, b[16:]...)...), "no address": append(append([]byte(nil), b[:16]...), make([]byte, 8)...)} {
		if _, err := ParseMR(bad); !errors.Is(err, ErrProtocol) {
			t.Errorf("%s: ParseMR err = %v, want ErrProtocol", name, err)
		}
	}
}

// TestAppendRegMR checks the layout helper.c's do_reg_mr reads: offset,
// length, access, padding and (since protocol 3) the iova the device
// knows the region by.
func TestAppendRegMR(t *testing.T) {
	for _, tt := range []struct {
		name                 string
		offset, length, iova uint64
		access               uint32
	}{
		{"application address", 4096, 8192, 0x7f0000001000, AccessLocalWrite | AccessRemoteWrite},
		{"iova zero", 0, 4096, 0, AccessRemoteRead},
	} {
		t.Run(tt.name, func(t *testing.T) {
			msg := AppendRegMR(nil, 9, tt.offset, tt.length, tt.access, tt.iova)
			h, err := ParseHeader(msg)
			if err != nil {
				t.Fatal(err)
			}
			b := msg[HeaderSize:]
			if h.Op() != OpRegMR || h.Seq() != 9 || len(b) != 32 {
				t.Fatalf("op %v seq %d body %d bytes, want OpRegMR, 9, 32", h.Op(), h.Seq(), len(b))
			}
			if ne.Uint64(b[0:]) != tt.offset || ne.Uint64(b[8:]) != tt.length || ne.Uint32(b[16:]) != tt.access || ne.Uint32(b[20:]) != 0 || ne.Uint64(b[24:]) != tt.iova {
				t.Fatalf("body %x does not carry offset %d, length %d, access %#x, iova %#x", b, tt.offset, tt.length, tt.access, tt.iova)
			}
		})
	}
}
