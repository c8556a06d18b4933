package ibcm

import (
	"bytes"
	"errors"
	"net/netip"
	"testing"
)

func TestParseMADRefuses(t *testing.T) {
	good := AppendHeader(nil, CMHeader(AttrREQ, 7))
	good = append(good, make([]byte, DataSize)...)
	tests := []struct {
		name  string
		mad   []byte
		field string
	}{
		{"short", good[:255], "MAD"},
		{"long", append(bytes.Clone(good), 0), "MAD"},
		{"empty", nil, "MAD"},
		{"base version 2", func() []byte { b := bytes.Clone(good); b[0] = 2; return b }(), "base version"},
		{"subnet administration's class", func() []byte { b := bytes.Clone(good); b[1] = 0x03; return b }(), "management class"},
	}
	for _, tt := range tests {
		_, _, err := ParseMAD(tt.mad)
		var fe *FormatError
		if !errors.As(err, &fe) || fe.Field != tt.field {
			t.Errorf("%s: ParseMAD error %v, want a FormatError on %q", tt.name, err, tt.field)
		}
	}
	if _, d, err := ParseMAD(good); err != nil || len(d) != DataSize {
		t.Fatalf("a well-formed MAD: %v, %d bytes of data", err, len(d))
	}
}

func TestMessagesRoundTrip(t *testing.T) {
	pd := []byte("private data")
	rej := REJ{LocalCommID: 1, RemoteCommID: 2, MessageRejected: MsgREP, ARILength: 16, Reason: RejectConsumerDefined, PrivateData: pd}
	copy(rej.ARI[:], "additional rejection info")
	mra := MRA{LocalCommID: 3, RemoteCommID: 4, MessageMRAed: MsgREQ, ServiceTimeout: 0x1f, PrivateData: pd}
	req := REQ{LocalCommID: 9, ServiceID: ServiceID(PortSpaceUDP, 4791), LocalQPN: 0xabcdef, StartingPSN: 0xffffff,
		RemoteCMResponseTimeout: 0x1f, TransportType: 1, LocalCMResponseTimeout: 3, RetryCount: 7, PKey: 0x8001, PathMTU: 5,
		RNRRetryCount: 6, MaxCMRetries: 15, SRQ: true, Primary: Path{FlowLabel: 0xfffff, PacketRate: 0x3f, SL: 0xf, SubnetLocal: true, LocalACKTimeout: 0x1f},
		PrivateData: pd}
	rep := REP{LocalCommID: 5, RemoteCommID: 6, LocalQPN: 0x123456, StartingPSN: 1, TargetACKDelay: 0x1f, FailoverAccepted: 2,
		EndToEndFlowControl: true, RNRRetryCount: 7, SRQ: true, LocalCAGUID: 0x0102030405060708, PrivateData: pd}

	enc := func(f func([]byte) ([]byte, error)) []byte {
		b, err := f(nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != DataSize {
			t.Fatalf("encoded %d bytes of data, want %d", len(b), DataSize)
		}
		return b
	}
	gotREJ, err := ParseREJ(enc(rej.Append))
	if err != nil || gotREJ.Reason != rej.Reason || gotREJ.MessageRejected != MsgREP || gotREJ.ARILength != 16 || gotREJ.ARI != rej.ARI ||
		!bytes.HasPrefix(gotREJ.PrivateData, pd) || len(gotREJ.PrivateData) != REJPrivateSize {
		t.Errorf("REJ round trip: %+v, %v", gotREJ, err)
	}
	gotMRA, err := ParseMRA(enc(mra.Append))
	if err != nil || gotMRA.ServiceTimeout != 0x1f || gotMRA.MessageMRAed != MsgREQ || len(gotMRA.PrivateData) != MRAPrivateSize {
		t.Errorf("MRA round trip: %+v, %v", gotMRA, err)
	}
	gotREQ, err := ParseREQ(enc(req.Append))
	gotREQ.PrivateData = req.PrivateData
	gotREQ.Alternate = req.Alternate
	if err != nil || !equalREQ(gotREQ, req) {
		t.Errorf("REQ round trip:\n got %+v\nwant %+v (%v)", gotREQ, req, err)
	}
	gotREP, err := ParseREP(enc(rep.Append))
	gotREP.PrivateData = rep.PrivateData
	if err != nil || gotREP.LocalQPN != rep.LocalQPN || gotREP.TargetACKDelay != 0x1f || gotREP.FailoverAccepted != 2 ||
		!gotREP.EndToEndFlowControl || gotREP.RNRRetryCount != 7 || !gotREP.SRQ || gotREP.LocalCAGUID != rep.LocalCAGUID {
		t.Errorf("REP round trip: %+v, %v", gotREP, err)
	}

	// Too much private data is an error, not a truncation.
	long := RTU{PrivateData: make([]byte, RTUPrivateSize+1)}
	var fe *FormatError
	if _, err := long.Append(nil); !errors.As(err, &fe) {
		t.Errorf("an RTU with %d bytes of private data: %v, want a FormatError", RTUPrivateSize+1, err)
	}
	// A REJ whose ARI length is past its field is refused.
	bad := enc(rej.Append)
	bad[9] = 100 << 1
	if _, err := ParseREJ(bad); !errors.As(err, &fe) {
		t.Errorf("a REJ with ARI length 100: %v, want a FormatError", err)
	}
}

func equalREQ(a, b REQ) bool {
	a.PrivateData, b.PrivateData = nil, nil
	return a.LocalCommID == b.LocalCommID && a.ServiceID == b.ServiceID && a.LocalQPN == b.LocalQPN && a.StartingPSN == b.StartingPSN &&
		a.RemoteCMResponseTimeout == b.RemoteCMResponseTimeout && a.TransportType == b.TransportType &&
		a.LocalCMResponseTimeout == b.LocalCMResponseTimeout && a.RetryCount == b.RetryCount && a.PKey == b.PKey &&
		a.PathMTU == b.PathMTU && a.RNRRetryCount == b.RNRRetryCount && a.MaxCMRetries == b.MaxCMRetries && a.SRQ == b.SRQ &&
		a.Primary == b.Primary
}

func TestServiceID(t *testing.T) {
	tests := []struct {
		ps   PortSpace
		port uint16
		id   uint64
	}{
		{PortSpaceTCP, 7174, 0x0000000001061c06},
		{PortSpaceUDP, 1, 0x0000000001110001},
		{PortSpaceIB, 0xffff, 0x00000000013fffff},
	}
	for _, tt := range tests {
		if got := ServiceID(tt.ps, tt.port); got != tt.id {
			t.Errorf("ServiceID(%#x, %d) = %#x, want %#x", tt.ps, tt.port, got, tt.id)
		}
		if ps, port, ok := ParseServiceID(tt.id); !ok || ps != tt.ps || port != tt.port {
			t.Errorf("ParseServiceID(%#x) = %#x, %d, %v", tt.id, ps, port, ok)
		}
	}
	if _, _, ok := ParseServiceID(0x1234); ok {
		t.Error("a service ID outside the IP CM range parsed as one")
	}
}

func TestIPHeader(t *testing.T) {
	v6 := IPHeader{SrcPort: 40000, Src: netip.MustParseAddr("fd00::1"), Dst: netip.MustParseAddr("fe80::2")}
	b, err := AppendIPHeader(nil, v6)
	if err != nil || len(b) != IPHeaderSize || b[1] != 0x60 {
		t.Fatalf("IPv6 header %x, %v", b, err)
	}
	got, rest, err := ParseIPHeader(append(b, "consumer"...))
	if err != nil || got != v6 || string(rest) != "consumer" {
		t.Errorf("IPv6 round trip: %+v %q %v", got, rest, err)
	}
	var fe *FormatError
	if _, err := AppendIPHeader(nil, IPHeader{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("fd00::1")}); !errors.As(err, &fe) {
		t.Errorf("mixed families: %v, want a FormatError", err)
	}
	if _, _, err := ParseIPHeader(make([]byte, 35)); !errors.As(err, &fe) {
		t.Errorf("35 bytes: %v, want a FormatError", err)
	}
	bad := bytes.Clone(b)
	bad[1] = 5 << 4
	if _, _, err := ParseIPHeader(bad); !errors.As(err, &fe) {
		t.Errorf("IP version 5: %v, want a FormatError", err)
	}
}
