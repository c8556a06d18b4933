package vrdma_test

// How connections fail: rejected with a reason and private data, nobody
// listening, nobody answering, a listener that goes away, private data that
// does not fit; and how they end: a disconnection both sides see.

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/ibv"
)

// expectErr checks that err matches kind and its message has each of msgs.
func expectErr(t testing.TB, err error, kind error, msgs ...string) {
	t.Helper()
	if !errors.Is(err, kind) {
		t.Fatalf("err = %v, want one matching %v", err, kind)
	}
	for _, m := range msgs {
		if !strings.Contains(err.Error(), m) {
			t.Fatalf("error %q does not say %q", err, m)
		}
	}
}

// expectReject checks that err is a *RejectError with reason, a text that
// has text, and private data data.
func expectReject(t testing.TB, err error, reason vrdma.RejectReason, text string, data []byte) *vrdma.RejectError {
	t.Helper()
	var rej *vrdma.RejectError
	if !errors.As(err, &rej) {
		t.Fatalf("err = %v (%T), want a *vrdma.RejectError", err, err)
	}
	if rej.Reason != reason || (!strings.Contains(rej.Text, text) && !madPath(t)) || !samePrivate(rej.PrivateData, string(data)) {
		t.Fatalf("rejected with %v %q %q, want %v, a text with %q, %q", rej.Reason, rej.Text, rej.PrivateData, reason, text, data)
	}
	if !errors.Is(err, vrdma.ErrRejected) {
		t.Fatalf("%v does not match ErrRejected", err)
	}
	return rej
}

// cmEnvs runs f on one daemon and on two daemons joined by a link.
func cmEnvs(t *testing.T, f func(t *testing.T, e *confEnv, addrB netip.Addr)) {
	t.Run("same host", func(t *testing.T) {
		e := sameHostEnv(t)
		f(t, e, gidAddr(t, e.b, 0))
	})
	t.Run("two hosts", func(t *testing.T) {
		h := newCMHosts(t, ibv.MTU1024)
		f(t, h.env(t), h.addrs[1])
	})
}

// The listener rejects with a reason and private data; the requester's QP,
// never connected, can dial again.
func TestCMReject(t *testing.T) {
	cmEnvs(t, func(t *testing.T, e *confEnv, addrB netip.Addr) {
		ctx := cmCtx(t)
		a, b := newSide(t, e.a, qpSpec{}), newSide(t, e.b, qpSpec{})
		l := listen(t, e.b, 0)
		done := make(chan error, 1)
		go func() {
			req, err := l.Accept(ctx)
			if err == nil {
				if !samePrivate(req.PrivateData, "let me in") {
					err = errors.New("the request's private data is " + string(req.PrivateData))
				} else {
					err = req.Reject("not today", []byte("come back tomorrow"))
				}
			}
			done <- err
		}()
		_, err := e.a.Dial(ctx, a.qp, addrB, l.Port(), []byte("let me in"))
		expectReject(t, err, vrdma.RejectConsumer, "not today", []byte("come back tomorrow"))
		if errors.Is(err, vrdma.ErrTimeout) {
			t.Fatalf("a consumer reject matches ErrTimeout: %v", err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		expectState(t, a.qp, ibv.QPSReset)
		cmConnect(t, a, b, addrB)
		rcWorkload(t, a, b, 1)
	})
}

// A request to a port nobody listens on is rejected at once.
func TestCMNoListener(t *testing.T) {
	cmEnvs(t, func(t *testing.T, e *confEnv, addrB netip.Addr) {
		a := newSide(t, e.a, qpSpec{})
		_, err := e.a.Dial(cmCtx(t), a.qp, addrB, 4242, nil)
		expectReject(t, err, vrdma.RejectNoListener, "no listener on port 4242", nil)
		expectState(t, a.qp, ibv.QPSReset)
	})
}

// An address that no adapter of the host has: over CM MADs nobody
// answers (as with a Linux peer, the REQ goes to an address nobody has),
// so the dial times out.
func TestCMWrongAddress(t *testing.T) {
	h := newCMHosts(t, ibv.MTU1024)
	e := h.env(t)
	l := listen(t, e.b, 0)
	a := newSide(t, e.a, qpSpec{})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := e.a.Dial(ctx, a.qp, netip.MustParseAddr("10.0.0.99"), l.Port(), nil)
	expectErr(t, err, vrdma.ErrTimeout, "10.0.0.99")
}

// A listener that never answers: the requester times out with an error of
// the timeout kind, and the request is withdrawn from the listener.
func TestCMAcceptNeverComes(t *testing.T) {
	cmEnvs(t, func(t *testing.T, e *confEnv, addrB netip.Addr) {
		a, b := newSide(t, e.a, qpSpec{}), newSide(t, e.b, qpSpec{})
		l := listen(t, e.b, 0)
		reqs := make(chan *vrdma.ConnRequest, 1)
		go func() {
			if req, err := l.Accept(cmCtx(t)); err == nil {
				reqs <- req
			}
			close(reqs)
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		_, err := e.a.Dial(ctx, a.qp, addrB, l.Port(), nil)
		expectErr(t, err, vrdma.ErrTimeout)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%v does not match context.DeadlineExceeded", err)
		}
		req := <-reqs
		if req == nil {
			t.Fatal("the listener got no request")
		}
		// The requester's REJ withdraws the request, or, if it was lost, the
		// listener's daemon gives up on its own: a timeout either way.
		_, err = req.Accept(cmCtx(t), b.qp, nil)
		expectErr(t, err, vrdma.ErrTimeout)
		var rej *vrdma.RejectError
		if errors.As(err, &rej) && !rej.Timeout() {
			t.Fatalf("%v: Timeout() is false", err)
		}
	})
}

// Disconnect: both QPs go to ERR (outstanding receives flush), the peer's
// Done closes with the private data of the disconnection, and a second
// disconnect on either side is no error.
func TestCMDisconnect(t *testing.T) {
	cmEnvs(t, func(t *testing.T, e *confEnv, addrB netip.Addr) {
		a, b := newSide(t, e.a, qpSpec{}), newSide(t, e.b, qpSpec{})
		ca, cb := cmConnect(t, a, b, addrB)
		postRecv(t, b.qp, recvWR(77, b.mr.SGE(recvOff, 64)))
		if err := ca.Disconnect(cmCtx(t), []byte("bye")); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ca.Done():
		default:
			t.Fatal("the disconnecting side's Done is open after Disconnect")
		}
		select {
		case <-cb.Done():
		case <-time.After(confTimeout):
			t.Fatal("the peer was not told of the disconnection")
		}
		if !samePrivate(cb.DisconnectData(), "bye") {
			t.Fatalf("the peer got %q with the disconnection", cb.DisconnectData())
		}
		expectState(t, a.qp, ibv.QPSErr)
		expectState(t, b.qp, ibv.QPSErr)
		checkWC(t, pollOne(t, b.rcq), errWC(b, 77, ibv.WCWRFlushErr))
		if err := cb.Disconnect(cmCtx(t), nil); err != nil {
			t.Fatalf("disconnecting a connection the peer ended: %v", err)
		}
		if err := ca.Disconnect(cmCtx(t), nil); err != nil {
			t.Fatalf("disconnecting twice: %v", err)
		}
	})
}

// Private data above rdma_cm's limits is refused before anything is sent.
func TestCMPrivateDataTooLarge(t *testing.T) {
	e := sameHostEnv(t)
	ctx := cmCtx(t)
	a, b := newSide(t, e.a, qpSpec{}), newSide(t, e.b, qpSpec{})
	addr := gidAddr(t, e.b, 0)
	l := listen(t, e.b, 0)
	_, err := e.a.Dial(ctx, a.qp, addr, l.Port(), make([]byte, 57))
	expectErr(t, err, vrdma.ErrPrivateDataTooLarge, "57 bytes", "at most 56")
	expectErr(t, err, vrdma.ErrInvalidArgument)

	reqs := make(chan *vrdma.ConnRequest, 1)
	go func() {
		req, _ := l.Accept(ctx)
		reqs <- req
	}()
	dialed := make(chan error, 1)
	var ca *vrdma.Conn
	go func() {
		var err error
		ca, err = e.a.Dial(ctx, a.qp, addr, l.Port(), make([]byte, 56))
		dialed <- err
	}()
	req := <-reqs
	if req == nil {
		t.Fatal("no request")
	}
	_, err = req.Accept(ctx, b.qp, make([]byte, 197))
	expectErr(t, err, vrdma.ErrPrivateDataTooLarge, "at most 196")
	err = req.Reject("x", make([]byte, 149))
	expectErr(t, err, vrdma.ErrPrivateDataTooLarge, "at most 148")
	err = req.Reject(strings.Repeat("x", 129), nil)
	expectErr(t, err, vrdma.ErrInvalidArgument, "at most 128")
	cb, err := req.Accept(ctx, b.qp, make([]byte, 196))
	if err != nil {
		t.Fatal(err)
	}
	if err := <-dialed; err != nil {
		t.Fatal(err)
	}
	if len(ca.PrivateData()) != 196 || len(cb.PrivateData()) != 56 {
		t.Fatalf("private data of %d and %d bytes arrived", len(ca.PrivateData()), len(cb.PrivateData()))
	}
	err = ca.Disconnect(ctx, make([]byte, 221))
	expectErr(t, err, vrdma.ErrPrivateDataTooLarge, "at most 220")
	if err := ca.Disconnect(ctx, make([]byte, 220)); err != nil {
		t.Fatal(err)
	}
	<-cb.Done()
	if len(cb.DisconnectData()) != 220 {
		t.Fatalf("%d bytes of disconnection data arrived", len(cb.DisconnectData()))
	}
}

// A listener whose process goes away: the request it was holding is
// rejected, and so are new ones.
func TestCMListenerSessionDies(t *testing.T) {
	cmEnvs(t, func(t *testing.T, e *confEnv, addrB netip.Addr) {
		dev, err := vrdma.Open("vrdma0", vrdma.Options{Socket: e.sockB, Instance: "conf-b"})
		if err != nil {
			t.Fatal(err)
		}
		defer dev.Close()
		l, err := dev.Listen(0)
		if err != nil {
			t.Fatal(err)
		}
		a := newSide(t, e.a, qpSpec{})
		ctx := cmCtx(t)
		dialed := make(chan error, 1)
		go func() {
			_, err := e.a.Dial(ctx, a.qp, addrB, l.Port(), nil)
			dialed <- err
		}()
		if _, err := l.Accept(ctx); err != nil {
			t.Fatal(err)
		}
		dev.Close() // the process holding the listener and its request ends
		expectReject(t, <-dialed, vrdma.RejectNoListener, "went away", nil)
		_, err = e.a.Dial(ctx, a.qp, addrB, l.Port(), nil)
		expectReject(t, err, vrdma.RejectNoListener, "no listener", nil)
	})
}

// A requester whose process goes away while the listener holds its
// request: the listener's accept fails.
func TestCMRequesterSessionDies(t *testing.T) {
	cmEnvs(t, func(t *testing.T, e *confEnv, addrB netip.Addr) {
		dev, err := vrdma.Open("vrdma0", vrdma.Options{Socket: e.sock, Instance: "conf-a"})
		if err != nil {
			t.Fatal(err)
		}
		defer dev.Close()
		a := newSide(t, dev, qpSpec{})
		b := newSide(t, e.b, qpSpec{})
		l := listen(t, e.b, 0)
		ctx := cmCtx(t)
		go func() { _, _ = dev.Dial(ctx, a.qp, addrB, l.Port(), nil) }()
		req, err := l.Accept(ctx)
		if err != nil {
			t.Fatal(err)
		}
		closeAndWait(t, dev, e.sock)
		_, err = req.Accept(ctx, b.qp, nil)
		expectReject(t, err, vrdma.RejectTimeout, "exited", nil)
	})
}

// A listener that accepts and then goes away before the requester
// confirms, or an established peer whose process exits: the other side's
// connection ends.
func TestCMPeerExitsWhenEstablished(t *testing.T) {
	cmEnvs(t, func(t *testing.T, e *confEnv, addrB netip.Addr) {
		dev, err := vrdma.Open("vrdma0", vrdma.Options{Socket: e.sockB, Instance: "conf-b"})
		if err != nil {
			t.Fatal(err)
		}
		defer dev.Close()
		a, b := newSide(t, e.a, qpSpec{}), newSide(t, dev, qpSpec{})
		ca, _ := cmConnect(t, a, b, addrB)
		dev.Close()
		select {
		case <-ca.Done():
		case <-time.After(confTimeout):
			t.Fatal("the requester was not told that the listener's process exited")
		}
		expectState(t, a.qp, ibv.QPSErr)
	})
}

// closeAndWait closes dev and waits until its daemon has ended the session.
func closeAndWait(t *testing.T, dev *vrdma.Device, sock string) {
	t.Helper()
	adm, err := vrdma.DialAdmin(vrdma.Options{Socket: sock})
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	sessions := func() int {
		st, err := adm.Stats()
		if err != nil {
			t.Fatal(err)
		}
		return st.Sessions
	}
	before := sessions()
	dev.Close()
	waitFor(t, "the daemon to end the session", func() bool { return sessions() < before })
}
