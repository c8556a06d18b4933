package connmgr_test

// A request's source GID is the sending daemon's to give only if its host
// owns it: with an authorizer, a request over TCP from one of this host's
// addresses, or (with PeerOwns) from an address another host owns, is
// rejected (invalid GID) and counted; in-process requests and a manager
// without an authorizer are as before.

import (
	"fmt"
	"sync"
	"testing"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/admit"
	"github.com/vrdma/vrdma/internal/cm"
	"github.com/vrdma/vrdma/internal/connmgr"
	"github.com/vrdma/vrdma/internal/proto"
)

// routeTable is a fake of the switch's: which host owns which GIDs.
type routeTable struct {
	mu    sync.Mutex
	owner map[[16]byte]string
	asked []string // "identity gid", as PeerOwns was asked
}

func (rt *routeTable) PeerOwns(identity string, gid [16]byte) bool {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.asked = append(rt.asked, fmt.Sprintf("%s %s", identity, gidText(gid)))
	return rt.owner[gid] == identity
}

func gidText(g [16]byte) string { return fmt.Sprintf("%x", g[:]) }

func TestCMRequestSource(t *testing.T) {
	hostbGID := [16]byte{10: 0xff, 11: 0xff, 192, 0, 2, 1} // req's source
	hostcGID := [16]byte{10: 0xff, 11: 0xff, 192, 0, 2, 3}
	everyoneIsHostb := func(admit.Peer) (string, error) { return "hostb", nil }
	type request struct {
		src  [16]byte // the zero GID: this host's
		want string   // "" served; else a part of the REJ's text
	}
	local := [16]byte{}
	tests := []struct {
		name      string
		authorize admit.Authorizer
		peerOwns  bool // the route table's hook, or nil
		requests  []request
		wrong     uint64 // Stats.WrongSource
	}{
		{"PeerOwns", everyoneIsHostb, true, []request{
			{hostbGID, ""},
			{hostcGID, "source 192.0.2.3 is not an address of host hostb, which sent the request"},
			{local, "is an address of host cm-test: a request from another daemon cannot come from it"},
		}, 2},
		{"no PeerOwns: this host's addresses only", everyoneIsHostb, false, []request{
			{hostcGID, ""},
			{local, "is an address of host cm-test"},
		}, 1},
		{"no authorizer: as before", nil, true, []request{
			{hostcGID, ""},
			{local, ""},
		}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := &routeTable{owner: map[[16]byte]string{hostbGID: "hostb", hostcGID: "hostc"}}
			m, h := newManager(t, func(c *connmgr.Config) {
				c.Authorize = tt.authorize
				if tt.peerOwns {
					c.PeerOwns = rt.PeerOwns
				}
			})
			s := listenSession(t, m, h, 7000, 16)
			p := dialCM(t, m)
			for i, r := range tt.requests {
				id := uint32(100 + i)
				rq := req(id, 7000, h.gid())
				rq.SrcGID = r.src
				if r.src == local {
					rq.SrcGID = h.gid()
				}
				p.Send(rq)
				if r.want != "" {
					p.ExpectREJ(id, cm.RejectInvalidGID, r.want)
					continue
				}
				if ev := s.event(); ev.Type != proto.CMEventRequest || [16]byte(ev.GID) != rq.SrcGID {
					t.Fatalf("request from %x: event %+v, want it served", rq.SrcGID, ev)
				}
			}
			if st := m.Stats(); st.WrongSource != tt.wrong {
				t.Fatalf("stats %+v, want %d requests refused for their source", st, tt.wrong)
			}
			if n := s.holds(connmgr.Connections); n != len(tt.requests)-int(tt.wrong) {
				t.Fatalf("%d connections charged, want one per request served", n)
			}
			if tt.authorize != nil && tt.peerOwns {
				rt.mu.Lock()
				asked := fmt.Sprint(rt.asked)
				rt.mu.Unlock()
				if want := fmt.Sprint([]string{"hostb " + gidText(hostbGID), "hostb " + gidText(hostcGID)}); asked != want {
					t.Fatalf("PeerOwns was asked %s, want %s", asked, want)
				}
			}
			// A session of this host dials the listener in process: its
			// source is this host's, and it is served.
			d := newSession(t, h.adapter)
			qp, _ := d.newQP(abi.QPTypeRC)
			gid := h.gid()
			if err := d.do(func() error {
				_, err := m.Connect(d, proto.CMConnectReq{ID: 5, QP: qp, PSN: 1, Addr: gid[:], Port: 7000})
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if ev := s.event(); ev.Type != proto.CMEventRequest || [16]byte(ev.GID) != gid {
				t.Fatalf("a request in process: event %+v, want it served", ev)
			}
		})
	}
}
