package vrdma_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/ibv"
)

// A server lends a region of its memory; a client connects to it with the
// connection manager, RDMA WRITEs into the region and SENDs a message that
// says it is done. Each is a program attached to its own instance (here
// two instances of one daemon; between hosts, the same code).
//
// Where each thing comes from: the server's address is its adapter's
// address (GID 0 as `vrdma devinfo -v` shows it; between hosts, the
// server's IP address on its link, as rping's -a), the port is the one it
// listens on, and the region's address and rkey travel in the private data
// of the server's reply (what rping sends in its first message). The
// connection manager fills in everything else a QP needs (the peer's QPN,
// PSN, GID, path MTU).
func Example() {
	sock, stop := startDaemon() // in this process, for the example; a host runs `vrdma daemon`
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	srv, err := openPeer(sock, "server")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.close()
	cli, err := openPeer(sock, "client")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cli.close()

	l, err := srv.dev.Listen(0) // 0: any free port; Port says which
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Close()
	gid, err := srv.dev.GID(0)
	if err != nil {
		fmt.Println(err)
		return
	}
	addr := netip.AddrFrom16(gid).Unmap()

	served := make(chan error, 1)
	go func() { served <- serve(ctx, srv, l) }()
	if err := connectAndWrite(ctx, cli, addr, l.Port()); err != nil {
		fmt.Println("client:", err)
	}
	if err := <-served; err != nil {
		fmt.Println("server:", err)
	}
	// Output:
	// client: connected; the server lends 32 bytes
	// client: wrote "hello from the client"
	// server: received "done"; the region holds "hello from the client"
}

// peer is one program's verbs objects: a device, a protection domain, a
// region, a completion queue and an RC queue pair in RESET.
type peer struct {
	dev *vrdma.Device
	pd  *vrdma.PD
	mr  *vrdma.MR
	cq  *vrdma.CQ
	qp  *vrdma.QP
}

func openPeer(sock, instance string) (*peer, error) {
	dev, err := vrdma.Open("vrdma0", vrdma.Options{Socket: sock, Instance: instance})
	if err != nil {
		return nil, err
	}
	p := &peer{dev: dev}
	if p.pd, err = dev.AllocPD(); err != nil {
		p.close()
		return nil, err
	}
	// The server's region may be written by the peer; the client's is
	// only read by its own adapter (the source of its WRITE and SEND).
	if p.mr, err = p.pd.AllocMR(64, ibv.AccessLocalWrite|ibv.AccessRemoteWrite); err != nil {
		p.close()
		return nil, err
	}
	if p.cq, err = dev.CreateCQ(16); err != nil {
		p.close()
		return nil, err
	}
	p.qp, err = p.pd.CreateQP(vrdma.QPInitAttr{Type: ibv.RC, SendCQ: p.cq, RecvCQ: p.cq,
		Cap: vrdma.QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 32}})
	if err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

// close ends the device's session: the daemon frees what it holds.
func (p *peer) close() { _ = p.dev.Close() }

// serve accepts one connection on l, lends the client the first 32 bytes
// of its region and waits for the client's SEND, received into the rest.
func serve(ctx context.Context, p *peer, l *vrdma.Listener) error {
	req, err := l.Accept(ctx)
	if err != nil {
		return err
	}
	// A receive for the client's message, posted before the QP connects
	// so that it is there when the message arrives.
	if err := p.qp.PostRecv([]vrdma.RecvWR{{ID: 1, SGL: []ibv.SGE{p.mr.SGE(32, 32)}}}); err != nil {
		return err
	}
	lend := p.mr.Remote()
	lend.Len = 32
	conn, err := req.Accept(ctx, p.qp, marshalRegion(lend)) // the region, in the reply's private data
	if err != nil {
		return err
	}
	defer conn.Disconnect(ctx, nil)
	wc, err := await(ctx, p.cq)
	if err != nil {
		return err
	}
	fmt.Printf("server: received %q; the region holds %q\n", p.mr.Bytes()[32:32+wc.ByteLen], cstring(p.mr.Bytes()[:32]))
	return nil
}

// connectAndWrite connects to the server at addr and port, writes into
// the region it lends and tells it so.
func connectAndWrite(ctx context.Context, p *peer, addr netip.Addr, port uint16) error {
	conn, err := p.dev.Dial(ctx, p.qp, addr, port, nil)
	if err != nil {
		return err
	}
	defer conn.Disconnect(ctx, nil)
	r, err := parseRegion(conn.PrivateData())
	if err != nil {
		return err
	}
	fmt.Printf("client: connected; the server lends %d bytes\n", r.Len)

	msg := copy(p.mr.Bytes(), "hello from the client")
	err = p.qp.PostSend([]vrdma.SendWR{{ID: 1, Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSignaled,
		SGL: []ibv.SGE{p.mr.SGE(0, msg)}, RemoteAddr: r.Addr, RKey: r.RKey}})
	if err != nil {
		return err
	}
	if _, err := await(ctx, p.cq); err != nil {
		return err
	}
	fmt.Printf("client: wrote %q\n", p.mr.Bytes()[:msg])

	// A WRITE makes no completion at the server: a SEND tells it. RC
	// delivers in order, so the server sees the WRITE's bytes first.
	done := copy(p.mr.Bytes()[32:], "done")
	err = p.qp.PostSend([]vrdma.SendWR{{ID: 2, Opcode: ibv.WRSend, Flags: ibv.SendSignaled,
		SGL: []ibv.SGE{p.mr.SGE(32, done)}}})
	if err != nil {
		return err
	}
	_, err = await(ctx, p.cq)
	return err
}

// await returns the next completion on cq: Wait sleeps until one is
// there, Poll takes it. A completion with an error status is an error
// (a *vrdma.WCError, which says what the status means).
func await(ctx context.Context, cq *vrdma.CQ) (vrdma.WorkCompletion, error) {
	wc := make([]vrdma.WorkCompletion, 1)
	for {
		n, err := cq.Poll(wc)
		if err != nil {
			return vrdma.WorkCompletion{}, err
		}
		if n == 1 {
			return wc[0], wc[0].Err()
		}
		if err := cq.Wait(ctx); err != nil {
			return vrdma.WorkCompletion{}, err
		}
	}
}

// marshalRegion encodes where a peer may write: address, rkey, length,
// big-endian, 16 bytes (a REP's private data holds 196).
func marshalRegion(r vrdma.RemoteMR) []byte {
	b := binary.BigEndian.AppendUint64(nil, r.Addr)
	b = binary.BigEndian.AppendUint32(b, r.RKey)
	return binary.BigEndian.AppendUint32(b, uint32(r.Len))
}

// parseRegion decodes what marshalRegion encoded. From another host the
// private data arrives zero-padded to its message's size, so it may be
// longer.
func parseRegion(b []byte) (vrdma.RemoteMR, error) {
	if len(b) < 16 {
		return vrdma.RemoteMR{}, errors.New("the server's reply holds no region")
	}
	return vrdma.RemoteMR{Addr: binary.BigEndian.Uint64(b), RKey: binary.BigEndian.Uint32(b[8:]), Len: uint64(binary.BigEndian.Uint32(b[12:]))}, nil
}

// cstring is b up to its first zero byte.
func cstring(b []byte) []byte {
	for i, c := range b {
		if c == 0 {
			return b[:i]
		}
	}
	return b
}
