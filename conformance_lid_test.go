package vrdma_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/ibv"
)

// TestConformanceLID: a port has a LID, unique among the host's adapters,
// and on instances configured for LID routing an address vector may name a
// port by its LID alone (no GRH, a zero DGID), as InfiniBand programs such
// as qperf do: RC and UC QPs connect
// and a UD address handle sends by LID, exactly as by the GID the daemon
// resolves it to, which Query then reports. An unknown or multicast LID is
// refused. (On one host; across the switch's hosts the daemon's tests
// cover it. The wire modes join two daemons with no switch, whose LIDs
// each name only their own ports.)
func TestConformanceLID(t *testing.T) {
	for _, m := range confModes {
		if m.wire {
			continue
		}
		m.lids = true
		t.Run(m.name, func(t *testing.T) { conformanceLID(t, newConfEnv(t, m)) })
	}
}

func portLID(t *testing.T, d *vrdma.Device) uint16 {
	t.Helper()
	p, err := d.QueryPort(1)
	if err != nil {
		t.Fatal(err)
	}
	return p.LID
}

// byLID is x's endpoint with its GID left out: the peer reaches it by LID.
func byLID(t *testing.T, x *side) vrdma.Endpoint {
	t.Helper()
	ep := x.endpoint(t)
	if ep.LID == 0 {
		t.Fatalf("QP 0x%x's endpoint has no LID", x.qp.QPN())
	}
	ep.GID = vrdma.GID{}
	return ep
}

func conformanceLID(t *testing.T, e *confEnv) {
	def, err := vrdma.Open("vrdma0", vrdma.Options{Socket: e.sock})
	if err != nil {
		t.Fatal(err)
	}
	defer def.Close()
	lids := map[uint16]string{}
	for name, d := range map[string]*vrdma.Device{"conf-a": e.a, "conf-b": e.b, "default": def} {
		lid := portLID(t, d)
		if lid == 0 || lid > 0xBFFF {
			t.Errorf("%s/vrdma0 has LID %#x, want a unicast LID", name, lid)
		}
		if other, dup := lids[lid]; dup {
			t.Errorf("%s/vrdma0 and %s/vrdma0 both have LID %#x", name, other, lid)
		}
		lids[lid] = name
	}

	for _, typ := range []ibv.QPType{ibv.RC, ibv.UC} {
		t.Run(typ.String(), func(t *testing.T) {
			a := e.newSide(t, e.a, qpSpec{typ: typ})
			b := e.newSide(t, e.b, qpSpec{typ: typ})
			if err := a.qp.Connect(byLID(t, b), a.connectOptions(nil)); err != nil {
				t.Fatal(err)
			}
			if err := b.qp.Connect(byLID(t, a), b.connectOptions(nil)); err != nil {
				t.Fatal(err)
			}
			for _, x := range []struct{ from, to *side }{{a, b}, {b, a}} {
				attr, _, err := x.from.qp.Query()
				if err != nil {
					t.Fatal(err)
				}
				if attr.AV.DGID != x.to.gid || attr.AV.DLID != portLID(t, x.to.dev) {
					t.Errorf("QP 0x%x's address vector has DGID %v, DLID %#x; want the peer's GID %v and its LID %#x",
						x.from.qp.QPN(), attr.AV.DGID, attr.AV.DLID, x.to.gid, portLID(t, x.to.dev))
				}
			}
			const n = 300
			src := fill(a.mr.Bytes()[srcOff:srcOff+n], 5)
			postRecv(t, b.qp, recvWR(7, b.mr.SGE(recvOff, n)))
			post(t, a.qp, vrdma.SendWR{ID: 1, Opcode: ibv.WRSend, Flags: ibv.SendSignaled, SGL: []ibv.SGE{a.mr.SGE(srcOff, n)}},
				vrdma.SendWR{ID: 2, Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSignaled, SGL: []ibv.SGE{a.mr.SGE(srcOff, n)},
					RemoteAddr: b.mr.Addr() + rdmaOff, RKey: b.mr.RKey()})
			checkWC(t, pollOne(t, a.scq), sendWC(a, 1, ibv.WCSend, n))
			checkWC(t, pollOne(t, a.scq), sendWC(a, 2, ibv.WCRDMAWrite, n))
			checkWC(t, pollOne(t, b.rcq), recvWC(b, 7, n, a))
			expectBytes(t, "receive buffer", b.mr.Bytes()[recvOff:recvOff+n], src)
			arrived(t, typ, b.mr.Bytes()[rdmaOff:rdmaOff+n], src)
			expectBytes(t, "write target", b.mr.Bytes()[rdmaOff:rdmaOff+n], src)
		})
	}

	t.Run("UD", func(t *testing.T) {
		a := e.newSide(t, e.a, qpSpec{typ: ibv.UD})
		b := e.newSide(t, e.b, qpSpec{typ: ibv.UD})
		for _, x := range []*side{a, b} {
			if err := x.qp.Connect(vrdma.Endpoint{}, x.connectOptions(nil)); err != nil {
				t.Fatal(err)
			}
		}
		ah, err := a.pd.CreateAH(ibv.AHAttr{DLID: portLID(t, e.b), SGIDIndex: uint8(a.gidIndex), PortNum: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer ah.Destroy()
		a.ah = ah
		const n = 100
		src := fill(a.mr.Bytes()[srcOff:srcOff+n], 9)
		postRecv(t, b.qp, recvWR(3, b.mr.SGE(recvOff, grhLen+n)))
		post(t, a.qp, a.sendTo(vrdma.SendWR{ID: 4, Opcode: ibv.WRSend, Flags: ibv.SendSignaled, SGL: []ibv.SGE{a.mr.SGE(srcOff, n)}}, b))
		checkWC(t, pollOne(t, a.scq), sendWC(a, 4, ibv.WCSend, n))
		want := recvWC(b, 3, grhLen+n, a)
		want.Flags = ibv.WCWithGRH
		checkWC(t, pollOne(t, b.rcq), want)
		mb := b.mr.Bytes()
		checkGRH(t, mb[recvOff:recvOff+grhLen], a.gid, b.gid)
		expectBytes(t, "payload", mb[recvOff+grhLen:recvOff+grhLen+n], src)
	})

	t.Run("refused", func(t *testing.T) {
		free := uint16(0xBFFF)
		for lids[free] != "" {
			free--
		}
		for _, c := range []struct {
			name string
			lid  uint16
			want string
		}{
			{"unknown", free, "no port with LID"},
			{"multicast", 0xC001, "not a unicast LID"},
			{"permissive", 0xFFFF, "not a unicast LID"},
		} {
			t.Run(c.name, func(t *testing.T) {
				a := e.newSide(t, e.a, qpSpec{})
				b := e.newSide(t, e.b, qpSpec{})
				ep := byLID(t, b)
				ep.LID = c.lid
				err := a.qp.Connect(ep, a.connectOptions(nil))
				if !errors.Is(err, vrdma.ErrInvalidAttr) || !strings.Contains(err.Error(), c.want) {
					t.Errorf("RC QP to LID %#x: %v; want ErrInvalidAttr saying %q", c.lid, err, c.want)
				}
				if st := queryState(t, a.qp); st != ibv.QPSInit {
					t.Errorf("the refused QP is in %v, want INIT (RTR refused)", st)
				}
				ah, err := a.pd.CreateAH(ibv.AHAttr{DLID: c.lid, SGIDIndex: uint8(a.gidIndex), PortNum: 1})
				if err == nil {
					_ = ah.Destroy()
				}
				if !errors.Is(err, vrdma.ErrInvalidArgument) || !strings.Contains(err.Error(), c.want) {
					t.Errorf("AH for LID %#x: %v; want ErrInvalidArgument saying %q", c.lid, err, c.want)
				}
			})
		}
	})
}
