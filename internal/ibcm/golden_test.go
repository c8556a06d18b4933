package ibcm

import (
	"bytes"
	"errors"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/vrdma/vrdma/internal/pcap"
	"github.com/vrdma/vrdma/internal/wire"
)

// capturedMADs returns the CM MADs of package wire's rping capture (two
// Linux kernels' rdma_cm over rdma_rxe: REQ, REP, RTU, then DREQ, DREP),
// each a UD SEND to QP1, in order.
func capturedMADs(t testing.TB) [][]byte {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "wire", "testdata", "rping.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcap.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var mads [][]byte
	for {
		frame, lt, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		ip, ok := pcap.IPPayloadOfFrame(lt, frame)
		if !ok {
			continue
		}
		var p wire.Packet
		if wire.Decode(ip, &p) != nil || p.DestQP != 1 {
			continue
		}
		mads = append(mads, bytes.Clone(p.Payload))
	}
	return mads
}

// The rping capture's MADs decode to what tshark shows for them
// (/work/shared/interop/captures/rping.dissect.txt, and tshark -V on the
// capture), and encode back to the same bytes.
func TestGoldenRping(t *testing.T) {
	mads := capturedMADs(t)
	wantAttrs := []AttrID{AttrREQ, AttrREP, AttrRTU, AttrDREQ, AttrDREP}
	if len(mads) != len(wantAttrs) {
		t.Fatalf("%d MADs in the capture, want %d", len(mads), len(wantAttrs))
	}
	for i, m := range mads {
		h, d, err := ParseMAD(m)
		if err != nil {
			t.Fatalf("MAD %d: %v", i, err)
		}
		if h.Attr != wantAttrs[i] || h.Method != MethodSend || h.ClassVersion != ClassVersion || h.TID != 0x00000002cd4d2a57 {
			t.Errorf("MAD %d: header %+v, want a CM Send of %v, TID 0x2cd4d2a57", i, h, wantAttrs[i])
		}
		out := AppendHeader(nil, h)
		switch h.Attr {
		case AttrREQ:
			req, err := ParseREQ(d)
			if err != nil {
				t.Fatal(err)
			}
			checkGoldenREQ(t, req)
			out, err = req.Append(out)
			if err != nil {
				t.Fatal(err)
			}
		case AttrREP:
			rep, err := ParseREP(d)
			if err != nil {
				t.Fatal(err)
			}
			want := REP{LocalCommID: 0x3934ff30, RemoteCommID: 0x572a4dcd, LocalQPN: 0x1f, StartingPSN: 0x9fe45c,
				ResponderResources: 1, InitiatorDepth: 1, TargetACKDelay: 0x0f, RNRRetryCount: 7, LocalCAGUID: 0x505400fffe479102}
			want.PrivateData = rep.PrivateData
			if rep.LocalCommID != want.LocalCommID || rep.RemoteCommID != want.RemoteCommID || rep.LocalQPN != want.LocalQPN ||
				rep.StartingPSN != want.StartingPSN || rep.ResponderResources != 1 || rep.InitiatorDepth != 1 ||
				rep.TargetACKDelay != 0x0f || rep.RNRRetryCount != 7 || rep.SRQ || rep.LocalCAGUID != want.LocalCAGUID {
				t.Errorf("REP %+v, want %+v", rep, want)
			}
			out, err = rep.Append(out)
			if err != nil {
				t.Fatal(err)
			}
		case AttrRTU:
			rtu, err := ParseRTU(d)
			if err != nil {
				t.Fatal(err)
			}
			if rtu.LocalCommID != 0x572a4dcd || rtu.RemoteCommID != 0x3934ff30 {
				t.Errorf("RTU IDs %#x %#x", rtu.LocalCommID, rtu.RemoteCommID)
			}
			out, err = rtu.Append(out)
			if err != nil {
				t.Fatal(err)
			}
		case AttrDREQ:
			dreq, err := ParseDREQ(d)
			if err != nil {
				t.Fatal(err)
			}
			if dreq.LocalCommID != 0x572a4dcd || dreq.RemoteCommID != 0x3934ff30 || dreq.RemoteQPN != 0x1f {
				t.Errorf("DREQ %+v", dreq)
			}
			out, err = dreq.Append(out)
			if err != nil {
				t.Fatal(err)
			}
		case AttrDREP:
			drep, err := ParseDREP(d)
			if err != nil {
				t.Fatal(err)
			}
			if drep.LocalCommID != 0x3934ff30 || drep.RemoteCommID != 0x572a4dcd {
				t.Errorf("DREP %+v", drep)
			}
			out, err = drep.Append(out)
			if err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(out, m) {
			t.Errorf("MAD %d (%v): encoding what was decoded changed it:\n got %x\nwant %x", i, h.Attr, out, m)
		}
	}
}

func checkGoldenREQ(t *testing.T, r REQ) {
	t.Helper()
	ps, port, ok := ParseServiceID(r.ServiceID)
	if !ok || ps != PortSpaceTCP || port != 0x1c06 {
		t.Errorf("service ID %#x: port space %#x port %#x (%v), want TCP port 0x1c06 (rping's 7174)", r.ServiceID, ps, port, ok)
	}
	type field struct {
		name      string
		got, want uint64
	}
	for _, f := range []field{
		{"local comm ID", uint64(r.LocalCommID), 0x572a4dcd},
		{"local CA GUID", r.LocalCAGUID, 0x505400fffe479101},
		{"local QPN", uint64(r.LocalQPN), 0x1f},
		{"responder resources", uint64(r.ResponderResources), 1},
		{"initiator depth", uint64(r.InitiatorDepth), 1},
		{"remote CM response timeout", uint64(r.RemoteCMResponseTimeout), 0x14},
		{"transport type", uint64(r.TransportType), 0},
		{"starting PSN", uint64(r.StartingPSN), 0x5059d4},
		{"local CM response timeout", uint64(r.LocalCMResponseTimeout), 0x14},
		{"retry count", uint64(r.RetryCount), 7},
		{"P_Key", uint64(r.PKey), 0xffff},
		{"path MTU", uint64(r.PathMTU), 3},
		{"RNR retry count", uint64(r.RNRRetryCount), 7},
		{"max CM retries", uint64(r.MaxCMRetries), 15},
		{"primary local LID", uint64(r.Primary.LocalLID), 0xffff},
		{"primary remote LID", uint64(r.Primary.RemoteLID), 0xffff},
		// tshark shows 0x000f0: its dissector shifts the field wrongly. The
		// kernel's value is 0x0f04c, which gives the RC traffic's UDP
		// source port 61519 (rdma_flow_label_to_udp_sport).
		{"primary flow label", uint64(r.Primary.FlowLabel), 0x0f04c},
		{"primary hop limit", uint64(r.Primary.HopLimit), 0x40},
		{"primary local ACK timeout", uint64(r.Primary.LocalACKTimeout), 0x13},
		{"alternate local LID", uint64(r.Alternate.LocalLID), 0},
	} {
		if f.got != f.want {
			t.Errorf("REQ %s = %#x, want %#x", f.name, f.got, f.want)
		}
	}
	if g := netip.AddrFrom16(r.Primary.LocalGID); g != netip.MustParseAddr("::ffff:10.47.91.1") {
		t.Errorf("REQ primary local GID %v", g)
	}
	if g := netip.AddrFrom16(r.Primary.RemoteGID); g != netip.MustParseAddr("::ffff:10.47.91.2") {
		t.Errorf("REQ primary remote GID %v", g)
	}
	ip, consumer, err := ParseIPHeader(r.PrivateData)
	if err != nil {
		t.Fatal(err)
	}
	want := IPHeader{SrcPort: 0x8afa, Src: netip.MustParseAddr("10.47.91.1"), Dst: netip.MustParseAddr("10.47.91.2")}
	if ip != want || len(consumer) != REQPrivateSize-IPHeaderSize {
		t.Errorf("IP CM header %+v (%d bytes after), want %+v", ip, len(consumer), want)
	}
	again, err := AppendIPHeader(nil, ip)
	if err != nil || !bytes.Equal(again, r.PrivateData[:IPHeaderSize]) {
		t.Errorf("the IP CM header re-encoded as %x (%v), want %x", again, err, r.PrivateData[:IPHeaderSize])
	}
}
