package verbs

import (
	"bytes"
	"errors"
	"testing"
)

// TestUDMessages checks the UD ops' layouts as csrc/ud.c reads them, and
// that an AH reply is parsed as untrusted.
func TestUDMessages(t *testing.T) {
	a := AHAttr{DGID: [16]byte{0: 0xfe, 1: 0x80, 15: 9}, FlowLabel: 0xabcde, DLID: 0x1234, SGIDIndex: 1, HopLimit: 64, TrafficClass: 0x20, SL: 5, IsGlobal: true}
	req := AppendCreateAH(nil, a)
	h, err := ParseHeader(req)
	if err != nil || h.Op() != OpCreateAH || len(req) != HeaderSize+32 {
		t.Fatalf("create_ah: %v, op %d, %d bytes", err, h.Op(), len(req))
	}
	b := req[HeaderSize:]
	if !bytes.Equal(b[:16], a.DGID[:]) || ne.Uint32(b[16:]) != 0xabcde || ne.Uint16(b[20:]) != 0x1234 ||
		!bytes.Equal(b[22:28], []byte{1, 64, 0x20, 5, 1, 0}) || ne.Uint32(b[28:]) != 0 {
		t.Errorf("create_ah body % x", b)
	}

	m := AppendModifyUDQP(nil, QP{Handle: 3}, QPStateInit, 0x11111111, 0)
	if h, _ := ParseHeader(m); h.Op() != OpModifyUDQP || len(m) != HeaderSize+16 ||
		ne.Uint32(m[16:]) != 3 || ne.Uint32(m[20:]) != QPStateInit || ne.Uint32(m[24:]) != 0x11111111 {
		t.Errorf("modify_ud_qp % x", m)
	}

	wrs := []UDSendWR{
		{WRID: 7, Opcode: WRSendWithImm, Flags: SendSignaled, Imm: 0x01020304, AH: 2, RemoteQPN: 0x123456, RemoteQKey: 0x11111111, SGEs: []SGE{{MR: 1, Length: 100, Offset: 8}}},
		{WRID: 8, Opcode: WRSend, AH: 3, RemoteQPN: 0x22},
	}
	p, err := AppendPostSendUD(nil, QP{Handle: 4}, wrs)
	if err != nil {
		t.Fatal(err)
	}
	body := p[HeaderSize:]
	if h, _ := ParseHeader(p); h.Op() != OpPostSendUD || len(body) != 8+40+16+40 || ne.Uint32(body) != 4 || ne.Uint32(body[4:]) != 2 {
		t.Fatalf("post_send_ud: %d-byte body % x", len(body), body[:8])
	}
	w := body[8:]
	if ne.Uint64(w) != 7 || ne.Uint32(w[8:]) != WRSendWithImm || ne.Uint32(w[12:]) != SendSignaled || ne.Uint32(w[16:]) != 0x01020304 ||
		ne.Uint32(w[20:]) != 1 || ne.Uint32(w[24:]) != 2 || ne.Uint32(w[28:]) != 0x123456 || ne.Uint32(w[32:]) != 0x11111111 ||
		ne.Uint32(w[36:]) != 0 || ne.Uint32(w[40:]) != 1 || ne.Uint32(w[44:]) != 100 || ne.Uint64(w[48:]) != 8 {
		t.Errorf("UD work request % x", w[:56])
	}
	if _, err := AppendPostSendUD(nil, QP{}, nil); err == nil {
		t.Error("an empty UD batch was taken")
	}
	if _, err := AppendPostSendUD(nil, QP{}, []UDSendWR{{SGEs: make([]SGE, MaxWRSGE+1)}}); err == nil {
		t.Error("a UD work request with too many SGEs was taken")
	}

	if q := AppendCreateQPOf(nil, CQ{Handle: 1}, CQ{Handle: 2}, QPCap{MaxSendWR: 1}, QPTypeUD); ne.Uint32(q[HeaderSize+28:]) != QPTypeUD {
		t.Errorf("create_qp of a UD QP: type %d", ne.Uint32(q[HeaderSize+28:]))
	}

	if ah, err := ParseAH(ne.AppendUint32(ne.AppendUint32(nil, 5), 0)); err != nil || ah.Handle != 5 {
		t.Errorf("ParseAH = %+v, %v", ah, err)
	}
	for name, bad := range map[string][]byte{
		"short":   ne.AppendUint32(nil, 5),
		"long":    make([]byte, 12),
		"padding": ne.AppendUint32(ne.AppendUint32(nil, 5), 1),
	} {
		if _, err := ParseAH(bad); !errors.Is(err, ErrProtocol) {
			t.Errorf("ParseAH(%s): %v, want ErrProtocol", name, err)
		}
	}
}
