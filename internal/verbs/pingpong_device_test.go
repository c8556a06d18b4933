package verbs

import (
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Environment of TestPingpongPeerOnDevice: the address of an
// `ibv_rc_pingpong` server (rdma-core's own example) to be the client of,
// or the address to listen on as the server of an `ibv_rc_pingpong`
// client; the interop test sets them in the guest.
const (
	testPingpongEnv       = "VRDMA_VERBS_TEST_PINGPONG"
	testPingpongListenEnv = "VRDMA_VERBS_TEST_PINGPONG_LISTEN"
	testPingpongItersEnv  = "VRDMA_VERBS_TEST_PINGPONG_ITERS"
	testPingpongSizeEnv   = "VRDMA_VERBS_TEST_PINGPONG_SIZE"
)

// ppAddress is rc_pingpong's out-of-band address message,
// "LID:QPN:PSN:GID" in 52 bytes with the NUL (the GID's 16 bytes in hex).
func ppAddress(qpn, psn uint32, gid [16]byte) []byte {
	msg := make([]byte, 52)
	copy(msg, fmt.Sprintf("%04x:%06x:%06x:%s", 0, qpn, psn, hex.EncodeToString(gid[:])))
	return msg
}

// parsePPAddress reads the peer's address message off c.
func parsePPAddress(c net.Conn) (qpn, psn uint32, gid [16]byte, err error) {
	msg := make([]byte, 52)
	if _, err := io.ReadFull(c, msg); err != nil {
		return 0, 0, gid, fmt.Errorf("reading the peer's address: %w", err)
	}
	f := strings.Split(strings.TrimRight(string(msg), "\x00"), ":")
	if len(f) != 4 || len(f[3]) != 32 {
		return 0, 0, gid, fmt.Errorf("the peer's address %q is not LID:QPN:PSN:GID", msg)
	}
	q, err1 := strconv.ParseUint(f[1], 16, 24)
	p, err2 := strconv.ParseUint(f[2], 16, 24)
	g, err3 := hex.DecodeString(f[3])
	if err1 != nil || err2 != nil || err3 != nil {
		return 0, 0, gid, fmt.Errorf("the peer's address %q: %v %v %v", msg, err1, err2, err3)
	}
	copy(gid[:], g)
	return uint32(q), uint32(p), gid, nil
}

// TestPingpongPeerOnDevice is the peer, client or server, of rdma-core's
// own `ibv_rc_pingpong` with its QP driven through the helper: the
// out-of-band exchange of rc_pingpong (QPN, PSN, GID over TCP), the QP
// moved to RTS with the other side's values as rc_pingpong does, then
// iterations of a SEND each way with the receives reposted, as
// rc_pingpong expects. It checks nothing but completions: both sides
// finishing every iteration with success is the test.
func TestPingpongPeerOnDevice(t *testing.T) {
	helper, dev := os.Getenv(testHelperEnv), os.Getenv(testDevEnv)
	server, listen := os.Getenv(testPingpongEnv), os.Getenv(testPingpongListenEnv)
	if helper == "" || dev == "" || server == "" && listen == "" {
		t.Skipf("needs an RDMA device and an ibv_rc_pingpong peer: set %s, %s and %s (or %s to be the server; the interop test does, in a guest)", testHelperEnv, testDevEnv, testPingpongEnv, testPingpongListenEnv)
	}
	iters, _ := strconv.Atoi(os.Getenv(testPingpongItersEnv))
	size, _ := strconv.Atoi(os.Getenv(testPingpongSizeEnv))
	if iters <= 0 || size <= 0 {
		iters, size = 100, 4096
	}
	h, err := StartHelper(helper)
	if err != nil {
		t.Fatal(err)
	}
	d, err := OpenDevice(h, dev, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	port, err := d.QueryPort()
	if err != nil {
		t.Fatal(err)
	}
	gid, ok := roceGID(port)
	if !ok {
		t.Fatalf("%s has no RoCE v2 GID", dev)
	}
	r := newRegion(t, d, (size+4095)&^4095)
	cq, err := d.CreateCQ(64, false)
	if err != nil {
		t.Fatal(err)
	}
	const depth = 16
	qp, err := d.CreateQP(cq, cq, QPCap{MaxSendWR: 1, MaxRecvWR: depth, MaxSendSGE: 1, MaxRecvSGE: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.ModifyQP(qp, QPAttr{State: QPStateInit}); err != nil {
		t.Fatal(err)
	}
	recvs := make([]RecvWR, depth)
	for i := range recvs {
		recvs[i] = RecvWR{WRID: 1, SGEs: r.sge(0, uint32(size))} // rc_pingpong's PINGPONG_RECV_WRID
	}
	if err := d.PostRecv(qp, recvs); err != nil {
		t.Fatal(err)
	}

	psn := rand.Uint32() & 0xffffff
	// rc_pingpong's attributes: MTU 1024, max_dest_rd_atomic 1, min_rnr_timer 12, timeout 14, retry 7, rnr_retry 7.
	toRTS := func(rqpn, rpsn uint32, rgid [16]byte) {
		t.Logf("local QPN %#06x PSN %#06x GID %x; remote QPN %#06x PSN %#06x GID %x", qp.QPN, psn, gid.GID, rqpn, rpsn, rgid)
		if err := d.ModifyQP(qp, QPAttr{State: QPStateRTR, PathMTU: 3, DestQPN: rqpn, RQPSN: rpsn, DGID: rgid, SGIDIndex: uint8(gid.Index),
			HopLimit: 1, IsGlobal: true, MaxDestRdAtomic: 1, MinRNRTimer: 12}); err != nil {
			t.Fatal(err)
		}
		if err := d.ModifyQP(qp, QPAttr{State: QPStateRTS, SQPSN: psn, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1}); err != nil {
			t.Fatal(err)
		}
	}
	var c net.Conn
	pending := 0 // the client sends first
	if listen != "" {
		// The server: read the client's address, go to RTS, answer with
		// ours, read its "done"; then wait for its first message.
		ln, err := net.Listen("tcp4", listen)
		if err != nil {
			t.Fatal(err)
		}
		ln.(*net.TCPListener).SetDeadline(time.Now().Add(60 * time.Second))
		c, err = ln.Accept()
		ln.Close()
		if err != nil {
			t.Fatalf("no ibv_rc_pingpong client came to %s: %v", listen, err)
		}
		defer c.Close()
		rqpn, rpsn, rgid, err := parsePPAddress(c)
		if err != nil {
			t.Fatal(err)
		}
		toRTS(rqpn, rpsn, rgid)
		if _, err := c.Write(ppAddress(qp.QPN, psn, gid.GID)); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, make([]byte, 5)); err != nil {
			t.Fatalf("the client's done: %v", err)
		}
		pending = 1
	} else {
		// The client: write our address, read the server's, go to RTS, say done.
		for end := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			if c, err = net.DialTimeout("tcp", server, 5*time.Second); err == nil || time.Now().After(end) {
				break
			}
		}
		if err != nil {
			t.Fatalf("no ibv_rc_pingpong server at %s: %v", server, err)
		}
		defer c.Close()
		if _, err := c.Write(ppAddress(qp.QPN, psn, gid.GID)); err != nil {
			t.Fatal(err)
		}
		rqpn, rpsn, rgid, err := parsePPAddress(c)
		if err != nil {
			t.Fatal(err)
		}
		toRTS(rqpn, rpsn, rgid)
		if _, err := c.Write([]byte("done\x00")); err != nil {
			t.Fatal(err)
		}
	}

	// rc_pingpong's loop: send (the server once a message came), and send
	// again once the send completed and a message came back.
	send := []SendWR{{WRID: 2, Opcode: WRSend, Flags: SendSignaled, SGEs: r.sge(0, uint32(size))}} // PINGPONG_SEND_WRID
	var wcs [8]WC
	scnt, rcnt := 0, 0
	deadline := time.Now().Add(60 * time.Second)
	for scnt < iters || rcnt < iters {
		if pending == 0 && scnt < iters {
			if err := d.PostSend(qp, send); err != nil {
				t.Fatalf("PostSend after %d sends: %v", scnt, err)
			}
			pending = 3
		}
		n, err := d.PollCQ(cq, wcs[:])
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("stuck after %d sends and %d receives of %d", scnt, rcnt, iters)
			}
			continue
		}
		for _, wc := range wcs[:n] {
			if wc.Status != WCSuccess {
				t.Fatalf("completion %+v after %d sends and %d receives: status %d", wc, scnt, rcnt, wc.Status)
			}
			switch wc.WRID {
			case 2:
				scnt++
				pending &^= 2
			case 1:
				if wc.Opcode != WCRecv || wc.ByteLen != uint32(size) {
					t.Errorf("receive %+v: want opcode %d, byte_len %d", wc, WCRecv, size)
				}
				rcnt++
				pending &^= 1
				if err := d.PostRecv(qp, recvs[:1]); err != nil {
					t.Fatal(err)
				}
			default:
				t.Fatalf("completion with wr_id %d", wc.WRID)
			}
		}
	}
	t.Logf("%d iterations of %d bytes each way with ibv_rc_pingpong", iters, size)
}
