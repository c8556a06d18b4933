package vrdma_test

import (
	"strings"
	"testing"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/ibv"
	"github.com/vrdma/vrdma/internal/daemontest"
)

// The zero ConnectOptions lets the peer do nothing: a WRITE to a QP
// connected with it completes with REM_INV_REQ_ERR, as on rdma_rxe, and
// the completion's error says why and what to pass instead. The package
// documentation once suggested the zero value, and the program that
// followed it failed with nothing to go on.
func TestConnectOptionsZeroAllowsNoRemoteAccess(t *testing.T) {
	sock := daemontest.Start(t)
	e := newConfEnvOn(t, [2]string{sock, sock})
	writeOnly := vrdma.DefaultConnectOptions()
	writeOnly.Access = ibv.AccessRemoteWrite
	readOnly := vrdma.DefaultConnectOptions()
	readOnly.Access = ibv.AccessRemoteRead
	cases := []struct {
		name   string
		opts   *vrdma.ConnectOptions // the responder's
		status ibv.Status
	}{
		{"nil", nil, ibv.WCSuccess},
		{"default", func() *vrdma.ConnectOptions { o := vrdma.DefaultConnectOptions(); return &o }(), ibv.WCSuccess},
		{"remote write", &writeOnly, ibv.WCSuccess},
		{"zero", &vrdma.ConnectOptions{}, ibv.WCRemInvReqErr},
		{"remote read only", &readOnly, ibv.WCRemInvReqErr},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, b := e.newSide(t, e.a, qpSpec{}), e.newSide(t, e.b, qpSpec{})
			connect(t, a, b, nil, c.opts)
			post(t, a.qp, vrdma.SendWR{ID: 1, Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSignaled,
				SGL: []ibv.SGE{a.mr.SGE(0, 64)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()})
			wc := pollOne(t, a.scq)
			if wc.Status != c.status {
				t.Fatalf("the WRITE completed with %v, want %v", wc.Status, c.status)
			}
			if c.status == ibv.WCSuccess {
				return
			}
			if msg := wc.Err().Error(); !strings.Contains(msg, "zero ConnectOptions") || !strings.Contains(msg, "ConnectOptions.Access") {
				t.Fatalf("the completion's error %q does not say that the zero ConnectOptions allows no WRITE and what to pass", msg)
			}
		})
	}
}
