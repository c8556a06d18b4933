package ibcm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
	"testing"
)

func TestSIDR(t *testing.T) {
	ip, err := AppendIPHeader(nil, IPHeader{SrcPort: 5000, Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2")})
	if err != nil {
		t.Fatal(err)
	}
	req := SIDRREQ{RequestID: 0xdeadbeef, PKey: 0xffff, ServiceID: ServiceID(PortSpaceUDP, 7174), PrivateData: ip}
	d, err := req.Append(nil)
	if err != nil || len(d) != DataSize {
		t.Fatalf("SIDR_REQ: %d bytes, %v", len(d), err)
	}
	// The fields where IBTA 12.11.1 puts them.
	if binary.BigEndian.Uint32(d[0:4]) != 0xdeadbeef || binary.BigEndian.Uint64(d[8:16]) != 0x0000000001111c06 || !bytes.Equal(d[16:16+IPHeaderSize], ip) {
		t.Fatalf("SIDR_REQ bytes %x", d[:52])
	}
	got, err := ParseSIDRREQ(d)
	if err != nil || got.RequestID != req.RequestID || got.PKey != 0xffff || got.ServiceID != req.ServiceID || len(got.PrivateData) != SIDRREQPrivateSize {
		t.Errorf("SIDR_REQ round trip %+v, %v", got, err)
	}

	rep := SIDRREP{RequestID: 0xdeadbeef, Status: SIDRValid, QPN: 0xabcdef, ServiceID: req.ServiceID, QKey: 0x11111111, PrivateData: []byte("hi")}
	d, err = rep.Append(nil)
	if err != nil {
		t.Fatal(err)
	}
	if d[4] != SIDRValid || d[8] != 0xab || d[10] != 0xef || binary.BigEndian.Uint32(d[20:24]) != 0x11111111 || string(d[96:98]) != "hi" {
		t.Fatalf("SIDR_REP bytes %x", d[:100])
	}
	gotRep, err := ParseSIDRREP(d)
	if err != nil || gotRep.QPN != rep.QPN || gotRep.QKey != rep.QKey || gotRep.ServiceID != rep.ServiceID || len(gotRep.PrivateData) != SIDRREPPrivateSize {
		t.Errorf("SIDR_REP round trip %+v, %v", gotRep, err)
	}

	var fe *FormatError
	if _, err := ParseSIDRREQ(d[:100]); !errors.As(err, &fe) {
		t.Errorf("a short SIDR_REQ: %v, want a FormatError", err)
	}
	if _, err := (&SIDRREP{PrivateData: make([]byte, SIDRREPPrivateSize+1)}).Append(nil); !errors.As(err, &fe) {
		t.Errorf("a SIDR_REP with too much private data: %v, want a FormatError", err)
	}
}
