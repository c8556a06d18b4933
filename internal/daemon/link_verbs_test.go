package daemon_test

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/daemon"
	"github.com/vrdma/vrdma/internal/pathsel"
	"github.com/vrdma/vrdma/internal/proto"
	"github.com/vrdma/vrdma/internal/verbs"
	"github.com/vrdma/vrdma/switchview"
	"golang.org/x/sys/unix"
)

// fakeVerbsHelper writes a script that runs this test binary as a verbs
// helper (TestFakeVerbsHelperProcess) in mode, and returns its path.
func fakeVerbsHelper(t *testing.T, mode string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "helper-"+mode)
	script := fmt.Sprintf("#!/bin/sh\nVRDMA_FAKE_VERBS_HELPER=%s exec %s -test.run='^TestFakeVerbsHelperProcess$'\n", mode, exe)
	if mode == "no-rdma-core" {
		script = "#!/bin/sh\necho 'helper: error while loading shared libraries: libibverbs.so.1: cannot open shared object file: No such file or directory' >&2\nexit 127\n"
	}
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// fakeRxePort is the port the fake helper's rxe0 reports: Ethernet, active,
// two RoCE v2 GIDs.
var fakeRxePort = verbs.PortAttr{State: 4, PhysState: 5, MaxMTU: 5, ActiveMTU: 3, LinkLayer: verbs.LinkLayerEthernet, GIDTableLen: 1024,
	GIDs: []verbs.GIDEntry{
		{Index: 0, Type: verbs.GIDTypeRoCEv2, GID: netip.MustParseAddr("fe80::5054:ff:fe47:9101").As16()},
		{Index: 1, Type: verbs.GIDTypeRoCEv2, GID: netip.MustParseAddr("::ffff:10.47.91.1").As16()},
	}}

// fakeDevices are the devices the fake helper has, by mode: rdma_rxe (the
// default), an InfiniBand HCA's port with a LID from a subnet manager, siw
// (iWARP: no atomics, few SGEs) and a usNIC (a transport no verbs uplink
// takes).
var fakeDevices = map[string]struct {
	name string
	attr verbs.DeviceAttr
	port verbs.PortAttr
}{
	"rxe": {"rxe0", verbs.DeviceAttr{PhysPortCnt: 1, MaxQP: 1 << 17, MaxQPWR: 1 << 14, MaxSGE: 32, AtomicCap: 1, NodeType: 1, FWVer: "0.0.0"}, fakeRxePort},
	"ib": {"mlx5_0", verbs.DeviceAttr{PhysPortCnt: 1, MaxQP: 1 << 18, MaxQPWR: 1 << 15, MaxSGE: 30, AtomicCap: 1, NodeType: 1, FWVer: "16.35.2000"},
		verbs.PortAttr{State: 4, PhysState: 5, MaxMTU: 5, ActiveMTU: 5, LinkLayer: verbs.LinkLayerInfiniBand, LID: 3, SMLID: 1, GIDTableLen: 128,
			GIDs: []verbs.GIDEntry{{Index: 0, Type: verbs.GIDTypeIB, GID: netip.MustParseAddr("fe80::2a:5054:ff:fe47:9101").As16()}}}},
	"siw": {"siw0", verbs.DeviceAttr{PhysPortCnt: 1, MaxQP: 1 << 14, MaxQPWR: 1 << 10, MaxSGE: 6, AtomicCap: 0, NodeType: 4, Transport: verbs.TransportIWARP, FWVer: "0.0.0"},
		verbs.PortAttr{State: 4, PhysState: 5, MaxMTU: 3, ActiveMTU: 3, LinkLayer: verbs.LinkLayerEthernet, GIDTableLen: 1,
			GIDs: []verbs.GIDEntry{{Index: 0, Type: verbs.GIDTypeIB, GID: [16]byte{0x52, 0x54, 0x00, 0x47, 0x91, 0x01}}}}},
	"usnic": {"usnic_0", verbs.DeviceAttr{PhysPortCnt: 1, MaxQP: 1 << 10, NodeType: 5, Transport: verbs.TransportUSNIC, FWVer: "0.0.0"}, fakeRxePort},
}

// TestFakeVerbsHelperProcess is a verbs helper speaking the protocol on
// descriptor 3, for the tests below; on its own it does nothing. Modes:
// rxe (a device rxe0 as rdma_rxe reports it), garbage (garbage after the
// hello), die-later (answers the open and one query, then exits),
// datapath (rxe0 that also makes CQs and QPs and takes their requests).
func TestFakeVerbsHelperProcess(t *testing.T) {
	mode := os.Getenv("VRDMA_FAKE_VERBS_HELPER")
	if mode == "" {
		return
	}
	const fd = 3
	send := func(b []byte) {
		if _, err := unix.Write(fd, b); err != nil {
			os.Exit(1)
		}
	}
	send(binaryHello())
	buf := make([]byte, verbs.MaxMessage)
	queries, cqs, qps := 0, 0, 0
	for {
		n, err := unix.Read(fd, buf)
		if err != nil || n == 0 {
			os.Exit(0)
		}
		if mode == "garbage" {
			send([]byte("this is not a message of the protocol"))
			continue
		}
		h, err := verbs.ParseHeader(buf[:n])
		if err != nil {
			os.Exit(2)
		}
		reply := func(status int32, body []byte) {
			send(append(verbs.AppendHeader(nil, h.Op()|verbs.OpReply, h.Seq(), status, len(body)), body...))
		}
		dev, ok := fakeDevices[mode]
		if !ok {
			dev = fakeDevices["rxe"]
		}
		switch h.Op() {
		case verbs.OpOpen:
			if name := string(buf[verbs.HeaderSize+8 : n]); name != dev.name {
				reply(int32(unix.ENODEV), []byte(dev.name))
				continue
			}
			reply(0, verbs.AppendDeviceAttr(nil, dev.attr))
		case verbs.OpQueryPort:
			queries++
			if mode == "die-later" && queries > 1 {
				os.Exit(3)
			}
			reply(0, verbs.AppendPortAttr(nil, dev.port))
		case verbs.OpCreateCQ:
			if mode != "datapath" {
				reply(int32(unix.EOPNOTSUPP), nil)
				continue
			}
			cqs++
			reply(0, binary.NativeEndian.AppendUint32(binary.NativeEndian.AppendUint32(nil, uint32(cqs)), binary.NativeEndian.Uint32(buf[verbs.HeaderSize:])))
		case verbs.OpCreateQP:
			if mode != "datapath" {
				reply(int32(unix.EOPNOTSUPP), nil)
				continue
			}
			qps++
			body := binary.NativeEndian.AppendUint32(nil, uint32(qps))
			body = binary.NativeEndian.AppendUint32(body, 0x1100+uint32(qps))   // the QPN
			body = append(body, buf[verbs.HeaderSize+8:verbs.HeaderSize+28]...) // the capabilities asked
			reply(0, binary.NativeEndian.AppendUint32(body, 0))
		case verbs.OpCreateAH:
			if mode != "datapath" {
				reply(int32(unix.EOPNOTSUPP), nil)
				continue
			}
			reply(0, binary.NativeEndian.AppendUint32(binary.NativeEndian.AppendUint32(nil, 7), 0))
		case verbs.OpCreateSRQ, verbs.OpCreateQPSRQ, verbs.OpQuerySRQ:
			if mode != "datapath" {
				reply(int32(unix.EOPNOTSUPP), nil)
				continue
			}
			reply(0, fakeSRQReply(h.Op(), buf[verbs.HeaderSize:n])) // verbs_srq_test.go
		case verbs.OpModifySRQ, verbs.OpDestroySRQ, verbs.OpPostSRQRecv,
			verbs.OpModifyQP, verbs.OpModifyUDQP, verbs.OpDestroyAH, verbs.OpDestroyQP, verbs.OpDestroyCQ, verbs.OpPostRecv, verbs.OpPostSend:
			if mode != "datapath" {
				reply(int32(unix.EOPNOTSUPP), nil)
				continue
			}
			reply(0, nil)
		default:
			reply(int32(unix.EOPNOTSUPP), nil)
		}
	}
}

func binaryHello() []byte {
	return binary.NativeEndian.AppendUint32(verbs.AppendHeader(nil, verbs.OpHello, 0, 0, 4), verbs.Version)
}

// TestVerbsLinkAddShowRestartDelete: `link add NAME type verbs dev rxe0`
// reports the device's link layer, state and GIDs with their types, is
// saved and restored, refuses a second link on the port and a device
// rdma-core lacks, and deletes.
func TestVerbsLinkAddShowRestartDelete(t *testing.T) {
	cfg := linkConfig(t)
	cfg.VerbsHelper = fakeVerbsHelper(t, "rxe")
	d := startDaemon(t, cfg)
	c := admin(t, cfg.SocketPath)

	check := func(what string, info proto.LinkInfo) {
		t.Helper()
		v := info.Verbs
		if info.Name != "hca0" || info.Type != "verbs" || info.Dev != "rxe0" || info.State != "ACTIVE" || info.PhysState != "LINK_UP" ||
			info.ActiveMTU != 3 || v == nil || v.LinkLayer != "Ethernet" || v.Transport != "InfiniBand" || v.PortState != "PORT_ACTIVE" ||
			len(v.GIDs) != 2 || v.GIDs[1].Type != "RoCE v2" || v.GIDs[1].Index != 1 || !hasGID(info, "::ffff:10.47.91.1") || !hasGID(info, "fe80::5054:ff:fe47:9101") {
			t.Fatalf("%s: %+v (verbs %+v)", what, info, v)
		}
	}
	var info proto.LinkInfo
	c.ok(proto.OpLinkAdd, proto.LinkSpec{Name: "hca0", Type: "verbs", Dev: "rxe0"}, &info)
	check("link add", info)
	if ls := d.Host().Links(); len(ls) != 0 {
		t.Errorf("a verbs link has no data path yet, but the engine has links %v", ls)
	}
	c.fails(proto.OpLinkAdd, proto.LinkSpec{Name: "hca1", Type: "verbs", Dev: "rxe0", DevPort: 1}, proto.CodeBusy, "one link per port")
	c.fails(proto.OpLinkAdd, proto.LinkSpec{Name: "hca1", Type: "verbs", Dev: "mlx5_0"}, proto.CodeNotFound, "rdma-core has no device mlx5_0 (it has rxe0")
	c.fails(proto.OpLinkAdd, proto.LinkSpec{Name: "hca1", Type: "verbs"}, proto.CodeInvalid, "no dev")
	c.fails(proto.OpLinkAdd, proto.LinkSpec{Name: "hca1", Type: "verbs", Dev: "rxe0", Netdev: "lo"}, proto.CodeInvalid, "netdev and dscp are for rxe links")
	c.fails(proto.OpLinkAdd, proto.LinkSpec{Name: "hca1", Type: "verbs", Dev: "../x"}, proto.CodeInvalid, "no device name")
	c.fails(proto.OpLinkAdd, proto.LinkSpec{Name: "r", Type: "rxe", Netdev: "lo", Dev: "rxe0"}, proto.CodeInvalid, "dev and port are for verbs links")
	if ls := listLinks(c); len(ls) != 1 {
		t.Fatalf("link show: %+v", ls)
	} else {
		check("link show", ls[0])
	}
	saved, err := os.ReadFile(filepath.Join(cfg.StateDir, "links.json"))
	if err != nil || !strings.Contains(string(saved), `"dev": "rxe0"`) || !strings.Contains(string(saved), `"type": "verbs"`) {
		t.Fatalf("links.json: %v %s", err, saved)
	}
	c.Close()
	d.Close()

	startDaemon(t, cfg)
	c2 := admin(t, cfg.SocketPath)
	ls := listLinks(c2)
	if len(ls) != 1 {
		t.Fatalf("after a restart, link show: %+v", ls)
	}
	check("restored", ls[0])
	c2.ok(proto.OpLinkDelete, proto.LinkSpec{Name: "hca0"}, nil)
	if ls := listLinks(c2); len(ls) != 0 {
		t.Errorf("after delete, link show: %+v", ls)
	}
}

// TestVerbsLinkHelperFaults: a helper that sends garbage, one that dies
// after the link is up, and a host without rdma-core each give the link
// an error or a DOWN state with the reason; the daemon goes on serving.
func TestVerbsLinkHelperFaults(t *testing.T) {
	tests := []struct {
		mode string
		code proto.Code // of link add; 0: it is added, then goes down
		want string
	}{
		{"garbage", proto.CodeInternal, "broke its protocol"},
		{"no-rdma-core", proto.CodeState, "apt-get install libibverbs1 ibverbs-providers"},
		{"die-later", 0, "the verbs helper is gone"},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			cfg := linkConfig(t)
			cfg.VerbsHelper = fakeVerbsHelper(t, tt.mode)
			startDaemon(t, cfg)
			c := admin(t, cfg.SocketPath)
			spec := proto.LinkSpec{Name: "hca0", Type: "verbs", Dev: "rxe0"}
			if tt.code != 0 {
				c.fails(proto.OpLinkAdd, spec, tt.code, tt.want)
				if ls := listLinks(c); len(ls) != 0 {
					t.Errorf("a failed link add left links: %+v", ls)
				}
				return
			}
			c.ok(proto.OpLinkAdd, spec, nil)
			ls := listLinks(c)
			if len(ls) != 1 || ls[0].State != "DOWN" || !strings.Contains(ls[0].Problem, tt.want) {
				t.Fatalf("link show after the helper died: %+v", ls)
			}
			c.ok(proto.OpLinkDelete, proto.LinkSpec{Name: "hca0"}, nil)
		})
	}
}

// TestVerbsLinkOnTheSwitch: the switch's record of the host carries the
// verbs uplink with its device, link layer and GIDs with their types, and
// that the daemon carries QPs on it: RC QPs and atomics (the gate's table,
// pathsel.DeviceFeatures) (`vrdma host show`).
func TestVerbsLinkOnTheSwitch(t *testing.T) {
	cfg := linkConfig(t)
	cfg.VerbsHelper = fakeVerbsHelper(t, "rxe")
	cfg.Switch = daemon.SwitchConfig{Enable: true, TCPListen: "127.0.0.1:0", TCPAddrs: []netip.Addr{netip.MustParseAddr("127.0.0.1")},
		HostTTL: 2 * time.Second, Grace: time.Second}
	startDaemon(t, cfg)
	c := admin(t, cfg.SocketPath)
	c.ok(proto.OpLinkAdd, proto.LinkSpec{Name: "hca0", Type: "verbs", Dev: "rxe0"}, nil)
	var r switchview.HostList
	c.ok(proto.OpHostList, nil, &r)
	var got *switchview.Uplink
	for _, h := range r.Hosts {
		for i, u := range h.Uplinks {
			if h.Self && u.Name == "hca0" {
				got = &h.Uplinks[i]
			}
		}
	}
	want := switchview.Uplink{Name: "hca0", Kind: "verbs", State: "up", MTU: 1024, Device: "rxe0", LinkLayer: "Ethernet",
		GIDs: []string{"fe80::5054:ff:fe47:9101", "::ffff:10.47.91.1"}, GIDTypes: []string{"RoCE v2", "RoCE v2"},
		Transport: "InfiniBand", Caps: &switchview.VerbsCaps{Atomic: "hca", MaxSGE: 32, MaxQPWR: 1 << 14}, CarriesQPs: true, Carries: pathsel.Carried()}
	if got == nil || !reflect.DeepEqual(*got, want) {
		t.Fatalf("host list: this host's uplink hca0 is %+v, want %+v (hosts %+v)", got, want, r.Hosts)
	}
}

// TestVerbsLinkKinds: the host record of a verbs uplink says what kind of
// device it is, as path selection needs it: an InfiniBand port its LID,
// subnet manager's LID and subnet prefix; siw transport iWARP and no
// atomics; each its limits; that the daemon carries RC QPs and atomics on
// it (for instances bound to it; a device that lacks atomics refuses them).
// A device whose transport no verbs uplink can use (usNIC) is refused at
// link add.
func TestVerbsLinkKinds(t *testing.T) {
	tests := []struct {
		mode string
		want switchview.Uplink // Name, Kind, State and GIDs are checked apart
		code proto.Code        // of link add, 0: it succeeds
		err  string
	}{
		{mode: "ib", want: switchview.Uplink{MTU: 4096, Device: "mlx5_0", LinkLayer: "InfiniBand", GIDTypes: []string{"IB"}, Transport: "InfiniBand",
			LID: 3, SMLID: 1, SubnetPrefix: "fe80:0000:0000:002a", Caps: &switchview.VerbsCaps{Atomic: "hca", MaxSGE: 30, MaxQPWR: 1 << 15}, CarriesQPs: true, Carries: pathsel.Carried()}},
		{mode: "siw", want: switchview.Uplink{MTU: 1024, Device: "siw0", LinkLayer: "Ethernet", GIDTypes: []string{"IB"}, Transport: "iWARP",
			Caps: &switchview.VerbsCaps{Atomic: "none", MaxSGE: 6, MaxQPWR: 1 << 10}, CarriesQPs: true, Carries: pathsel.Carried()}},
		{mode: "usnic", code: proto.CodeInvalid, err: "usnic_0 has transport usNIC: a verbs uplink needs an InfiniBand, RoCE or iWARP device"},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			cfg := linkConfig(t)
			cfg.VerbsHelper = fakeVerbsHelper(t, tt.mode)
			cfg.Switch = daemon.SwitchConfig{Enable: true, TCPListen: "127.0.0.1:0", TCPAddrs: []netip.Addr{netip.MustParseAddr("127.0.0.1")},
				HostTTL: 2 * time.Second, Grace: time.Second}
			startDaemon(t, cfg)
			c := admin(t, cfg.SocketPath)
			spec := proto.LinkSpec{Name: "hca0", Type: "verbs", Dev: fakeDevices[tt.mode].name}
			if tt.code != 0 {
				c.fails(proto.OpLinkAdd, spec, tt.code, tt.err)
				if ls := listLinks(c); len(ls) != 0 {
					t.Errorf("a refused link add left links: %+v", ls)
				}
				return
			}
			c.ok(proto.OpLinkAdd, spec, nil)
			var r switchview.HostList
			c.ok(proto.OpHostList, nil, &r)
			var got *switchview.Uplink
			for _, h := range r.Hosts {
				for i, u := range h.Uplinks {
					if h.Self && u.Name == "hca0" {
						got = &h.Uplinks[i]
					}
				}
			}
			if got == nil {
				t.Fatalf("host list has no uplink hca0: %+v", r.Hosts)
			}
			g := *got
			if g.Kind != "verbs" || g.State != "up" || len(g.GIDs) != 1 {
				t.Fatalf("uplink %+v", g)
			}
			g.Name, g.Kind, g.State, g.GIDs = "", "", "", nil
			if !reflect.DeepEqual(g, tt.want) {
				t.Fatalf("uplink hca0 on the switch:\n%+v (caps %+v)\nwant\n%+v (caps %+v)", g, g.Caps, tt.want, tt.want.Caps)
			}
		})
	}
}
