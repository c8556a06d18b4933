package verbs

import (
	"errors"
	"testing"
)

// TestSRQMessages: the SRQ requests' layouts, and the replies' checks: an
// SRQ smaller than asked, a limit over its entries, padding or a wrong
// length are ErrProtocol.
func TestSRQMessages(t *testing.T) {
	req := AppendCreateSRQ(nil, SRQAttr{MaxWR: 64, MaxSGE: 2, Limit: 5})
	if h, err := ParseHeader(req); err != nil || h.Op() != OpCreateSRQ || len(req) != HeaderSize+16 || ne.Uint32(req[HeaderSize+8:]) != 5 {
		t.Fatalf("create_srq request % x (%v)", req, err)
	}
	s := SRQ{Handle: 3, Attr: SRQAttr{MaxWR: 64, MaxSGE: 2}}
	req = AppendModifySRQ(nil, s, SRQLimit, SRQAttr{Limit: 7})
	if h, _ := ParseHeader(req); h.Op() != OpModifySRQ || ne.Uint32(req[HeaderSize:]) != 3 || ne.Uint32(req[HeaderSize+4:]) != SRQLimit || ne.Uint32(req[HeaderSize+12:]) != 7 {
		t.Fatalf("modify_srq request % x", req)
	}
	req, err := AppendPostSRQRecv(nil, s, []RecvWR{{WRID: 9, SGEs: []SGE{{MR: 1, Length: 8}}}})
	if err != nil {
		t.Fatal(err)
	}
	if h, err := ParseHeader(req); err != nil || h.Op() != OpPostSRQRecv || ne.Uint32(req[HeaderSize:]) != 3 || len(req) != HeaderSize+8+16+16 {
		t.Fatalf("post_srq_recv request % x (%v)", req, err)
	}
	if _, err := AppendPostSRQRecv(nil, s, nil); err == nil {
		t.Fatal("an empty SRQ batch was taken")
	}
	req = AppendCreateQPSRQ(nil, CQ{Handle: 1}, CQ{Handle: 2}, s, QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1})
	if h, err := ParseHeader(req); err != nil || h.Op() != OpCreateQPSRQ || len(req) != HeaderSize+qpSize+8 ||
		ne.Uint32(req[HeaderSize+12:]) != 0 || ne.Uint32(req[HeaderSize+qpSize:]) != 3 {
		t.Fatalf("create_qp on an SRQ: % x (%v)", req, err)
	}

	asked := SRQAttr{MaxWR: 64, MaxSGE: 2}
	tests := []struct {
		name string
		b    []byte
		ok   bool
	}{
		{"as asked", AppendSRQ(nil, SRQ{Handle: 1, Attr: SRQAttr{MaxWR: 64, MaxSGE: 2, Limit: 3}}), true},
		{"more than asked", AppendSRQ(nil, SRQ{Handle: 1, Attr: SRQAttr{MaxWR: 128, MaxSGE: 4}}), true},
		{"fewer entries", AppendSRQ(nil, SRQ{Attr: SRQAttr{MaxWR: 63, MaxSGE: 2}}), false},
		{"fewer SGEs", AppendSRQ(nil, SRQ{Attr: SRQAttr{MaxWR: 64, MaxSGE: 1}}), false},
		{"limit over entries", AppendSRQ(nil, SRQ{Attr: SRQAttr{MaxWR: 64, MaxSGE: 2, Limit: 65}}), false},
		{"short", make([]byte, 12), false},
	}
	for _, tt := range tests {
		if _, err := ParseSRQ(tt.b, asked); (err == nil) != tt.ok || (err != nil && !errors.Is(err, ErrProtocol)) {
			t.Errorf("ParseSRQ %s: %v, want ok=%v", tt.name, err, tt.ok)
		}
	}
	if a, err := ParseSRQAttr(AppendSRQAttr(nil, SRQAttr{MaxWR: 64, MaxSGE: 2, Limit: 9})); err != nil || a.Limit != 9 {
		t.Errorf("ParseSRQAttr: %+v, %v", a, err)
	}
	for _, b := range [][]byte{AppendSRQAttr(nil, SRQAttr{MaxWR: 4, Limit: 5}), append(AppendSRQAttr(nil, SRQAttr{})[:12], 1, 0, 0, 0), make([]byte, 20)} {
		if _, err := ParseSRQAttr(b); !errors.Is(err, ErrProtocol) {
			t.Errorf("ParseSRQAttr % x: %v, want ErrProtocol", b, err)
		}
	}
}
