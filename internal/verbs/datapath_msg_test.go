package verbs

import (
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestParseCQAndQP(t *testing.T) {
	c, err := ParseCQ(ne.AppendUint32(ne.AppendUint32(nil, 3), 127), 100)
	if err != nil || c != (CQ{Handle: 3, CQE: 127}) {
		t.Fatalf("ParseCQ = %+v, %v", c, err)
	}
	asked := QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}
	qp := func(words ...uint32) []byte {
		var b []byte
		for _, w := range words {
			b = ne.AppendUint32(b, w)
		}
		return b
	}
	q, err := ParseQP(qp(2, 0x11, 16, 16, 1, 1, 64, 0), asked)
	if err != nil || q != (QP{Handle: 2, QPN: 0x11, Cap: QPCap{16, 16, 1, 1, 64}}) {
		t.Fatalf("ParseQP = %+v, %v", q, err)
	}
	bad := []struct {
		name string
		err  error
	}{
		{"CQ short", func() error { _, err := ParseCQ(make([]byte, 7), 1); return err }()},
		{"CQ smaller than asked", func() error { _, err := ParseCQ(qp(0, 99), 100); return err }()},
		{"QP short", func() error { _, err := ParseQP(qp(2, 0x11, 16, 16, 1, 1, 64), asked); return err }()},
		{"QP padding", func() error { _, err := ParseQP(qp(2, 0x11, 16, 16, 1, 1, 64, 1), asked); return err }()},
		{"QPN over 24 bits", func() error { _, err := ParseQP(qp(2, 1<<24, 16, 16, 1, 1, 64, 0), asked); return err }()},
		{"QPN of QP1", func() error { _, err := ParseQP(qp(2, 1, 16, 16, 1, 1, 64, 0), asked); return err }()},
		{"fewer send WRs than asked", func() error { _, err := ParseQP(qp(2, 0x11, 15, 16, 1, 1, 64, 0), asked); return err }()},
		{"fewer receive SGEs than asked", func() error { _, err := ParseQP(qp(2, 0x11, 16, 16, 1, 0, 64, 0), asked); return err }()},
	}
	for _, tt := range bad {
		if !errors.Is(tt.err, ErrProtocol) {
			t.Errorf("%s: %v, want ErrProtocol", tt.name, tt.err)
		}
	}
}

func TestParseWCs(t *testing.T) {
	good := []WC{
		{WRID: 1, Status: WCSuccess, Opcode: WCRDMAWrite, QPN: 0x11},
		{WRID: 2, Status: WCSuccess, Opcode: WCRecvRDMAWithImm, ByteLen: 512, Imm: 0x04030201, QPN: 0x12, Flags: WCFlagWithImm},
		{WRID: 3, Status: WCRemAccessErr, Opcode: 0xdead, QPN: 0x11}, // the opcode of a failed one is undefined
		// A UD receive: the GRH in front, the source.
		{WRID: 4, Status: WCSuccess, Opcode: WCRecv, ByteLen: GRHSize + 1024, QPN: 0x13, SrcQP: 0x44, Flags: WCFlagGRH, SLID: 0x1234, SL: 15, DLIDPathBits: 2},
	}
	var wcs [4]WC
	n, err := ParseWCs(AppendWCs(nil, good), wcs[:])
	if err != nil || n != 4 || wcs[0] != good[0] || wcs[1] != good[1] || wcs[2] != good[2] || wcs[3] != good[3] {
		t.Fatalf("ParseWCs = %d, %v: %+v", n, err, wcs)
	}
	if n, err := ParseWCs(AppendWCs(nil, nil), wcs[:]); err != nil || n != 0 {
		t.Fatalf("ParseWCs(none) = %d, %v", n, err)
	}
	with := func(f func(*WC)) []byte { w := good[0]; f(&w); return AppendWCs(nil, []WC{w}) }
	enc := AppendWCs(nil, good)
	bad := []struct {
		name string
		b    []byte
		room int
	}{
		{"short", enc[:7], 4},
		{"more than asked", enc, 2},
		{"truncated", enc[:len(enc)-1], 4},
		{"extra", append(append([]byte(nil), enc...), 0), 4},
		{"padding", func() []byte { b := append([]byte(nil), enc...); b[4] = 1; return b }(), 4},
		{"status", with(func(w *WC) { w.Status = 24 }), 4},
		{"opcode of a success", with(func(w *WC) { w.Opcode = 130 }), 4},
		{"QPN", with(func(w *WC) { w.QPN = 1 << 24 }), 4},
		{"source QP", with(func(w *WC) { w.SrcQP = 1 << 24 }), 4},
		{"service level", with(func(w *WC) { w.SL = 16 }), 4},
		{"padding after the source", func() []byte { b := with(func(*WC) {}); b[len(b)-1] = 1; return b }(), 4},
		{"flags", with(func(w *WC) { w.Flags = 0x80 }), 4},
	}
	for _, tt := range bad {
		if _, err := ParseWCs(tt.b, wcs[:tt.room]); !errors.Is(err, ErrProtocol) {
			t.Errorf("%s: ParseWCs err = %v, want ErrProtocol", tt.name, err)
		}
	}
}

// TestPostLimits: a batch the helper would refuse is refused before it is
// sent, saying why.
func TestPostLimits(t *testing.T) {
	qp := QP{Handle: 1, QPN: 0x11}
	many := make([]SGE, MaxWRSGE)
	tests := []struct {
		name string
		wrs  []SendWR
		ok   bool
	}{
		{"one", []SendWR{{Opcode: WRSend}}, true},
		{"none", nil, false},
		{"too many", make([]SendWR, MaxBatch+1), false},
		{"too many SGEs", []SendWR{{SGEs: make([]SGE, MaxWRSGE+1)}}, false},
		{"inline", []SendWR{{Opcode: WRSend, Flags: SendInline, Inline: []byte("hello")}}, true},
		{"inline with an SGE", []SendWR{{Opcode: WRSend, Flags: SendInline, Inline: []byte("hello"), SGEs: many[:1]}}, false},
		{"inline data without SendInline", []SendWR{{Opcode: WRSend, Inline: []byte("hello")}}, false},
		{"inline over MaxWRInline", []SendWR{{Opcode: WRSend, Flags: SendInline, Inline: make([]byte, MaxWRInline+1)}}, false},
		{"over the message size", func() []SendWR {
			w := make([]SendWR, MaxBatch)
			for i := range w {
				w[i].SGEs = many
			}
			return w
		}(), false},
	}
	for _, tt := range tests {
		req, err := AppendPostSend(nil, qp, tt.wrs)
		if (err == nil) != tt.ok {
			t.Errorf("%s: AppendPostSend err = %v, want ok=%v", tt.name, err, tt.ok)
			continue
		}
		if err == nil {
			if _, err := ParseHeader(req); err != nil {
				t.Errorf("%s: the request is no message: %v", tt.name, err)
			}
		}
		if _, err := AppendPostRecv(nil, qp, make([]RecvWR, len(tt.wrs))); (err == nil) != (len(tt.wrs) > 0 && len(tt.wrs) <= MaxBatch) {
			t.Errorf("%s: AppendPostRecv of %d = %v", tt.name, len(tt.wrs), err)
		}
	}
}

// TestAppendPostSendInline: an inline work request carries its length in
// the word after the rkey and its bytes after the 56-byte request, padded
// to 8, with no SGEs; SendWRBytes says how much of the body it takes.
func TestAppendPostSendInline(t *testing.T) {
	wrs := []SendWR{
		{WRID: 1, Opcode: WRSend, Flags: SendInline | SendSignaled, Inline: []byte("0123456789")},
		{WRID: 2, Opcode: WRRDMAWrite, SGEs: []SGE{{MR: 3, Length: 8, Offset: 16}}, RemoteAddr: 0x1000, RKey: 7},
	}
	req, err := AppendPostSend(nil, QP{Handle: 4}, wrs)
	if err != nil {
		t.Fatal(err)
	}
	b := req[HeaderSize:]
	if want := 8 + SendWRBytes(0, 10) + SendWRBytes(1, 0); len(b) != want || SendWRBytes(0, 10) != 56+16 {
		t.Fatalf("a body of %d bytes, want %d", len(b), want)
	}
	w := b[8:]
	if ne.Uint64(w) != 1 || ne.Uint32(w[12:]) != SendInline|SendSignaled || ne.Uint32(w[20:]) != 0 || ne.Uint32(w[36:]) != 10 ||
		string(w[56:66]) != "0123456789" || string(w[66:72]) != "\x00\x00\x00\x00\x00\x00" {
		t.Fatalf("the inline request is % x", w[:72])
	}
	w = w[72:]
	if ne.Uint64(w) != 2 || ne.Uint32(w[20:]) != 1 || ne.Uint32(w[36:]) != 0 || ne.Uint32(w[56:]) != 3 {
		t.Fatalf("the request after it is % x", w)
	}
}

// TestPollCQLyingHelper: a helper that returns more completions than were
// asked for, or a QPN of more than 24 bits, is ErrProtocol and is not asked
// again.
func TestPollCQLyingHelper(t *testing.T) {
	for name, wcs := range map[string][]WC{
		"more than asked": make([]WC, 3),
		"bad QPN":         {{QPN: 1 << 24}},
	} {
		t.Run(name, func(t *testing.T) {
			h := fakeHelper(t, helloMsg(Version), func(req Header, _ []byte) []byte {
				return reply(req, 0, AppendWCs(nil, wcs))
			})
			if err := h.hello(); err != nil {
				t.Fatal(err)
			}
			d := &Device{Name: "rxe0", Attr: rxeAttr, h: h}
			var got [2]WC
			if _, err := d.PollCQ(CQ{}, got[:]); !errors.Is(err, ErrProtocol) {
				t.Fatalf("PollCQ = %v, want ErrProtocol", err)
			}
			if _, err := d.PollCQ(CQ{}, got[:]); !errors.Is(err, ErrProtocol) {
				t.Fatalf("PollCQ after the lie = %v, want ErrProtocol again", err)
			}
		})
	}
}

// BenchmarkPollCQ is an empty poll's cost on the daemon's side, against a
// fake helper: no allocation but the socket read's.
func BenchmarkPollCQ(b *testing.B) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	ours := os.NewFile(uintptr(fds[0]), "ours")
	c, err := net.FileConn(ours)
	ours.Close()
	if err != nil {
		b.Fatal(err)
	}
	go func() {
		buf := make([]byte, MaxMessage)
		out := make([]byte, 0, 64)
		unix.Write(fds[1], helloMsg(Version))
		for {
			n, err := unix.Read(fds[1], buf)
			if err != nil || n == 0 {
				unix.Close(fds[1])
				return
			}
			h := Header(buf[:HeaderSize])
			out = AppendWCs(AppendHeader(out[:0], h.Op()|OpReply, h.Seq(), 0, pollHdrSize), nil)
			unix.Write(fds[1], out)
		}
	}()
	d := &Device{Name: "rxe0", Attr: rxeAttr, h: newHelper(c.(*net.UnixConn))}
	defer d.h.Close()
	if err := d.h.hello(); err != nil {
		b.Fatal(err)
	}
	var wcs [16]WC
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := d.PollCQ(CQ{}, wcs[:]); err != nil {
			b.Fatal(err)
		}
	}
}

// TestPushedCompletionsFake: the first pushing CQ sends the helper a push
// socket; completions the helper pushes on it reach the handler with their
// CQ, and a push that breaks the protocol (an op other than completions, a
// seq, none, a bad completion) fails the helper with ErrProtocol.
func TestPushedCompletionsFake(t *testing.T) {
	push := func(cq uint32, seq uint32, wcs []WC) []byte {
		body := AppendWCs(ne.AppendUint32(nil, cq), wcs)
		return append(AppendHeader(nil, OpCompletions, seq, 0, len(body)), body...)
	}
	good := []WC{{WRID: 7, Opcode: WCRecv, ByteLen: 18, QPN: 0x11}, {WRID: 8, Opcode: WCSend, QPN: 0x12}}
	tests := []struct {
		name string
		msg  []byte
		want error
	}{
		{"good", push(3, 0, good), nil},
		{"with a seq", push(3, 9, good), ErrProtocol},
		{"none", push(3, 0, nil), ErrProtocol},
		{"bad completion", push(3, 0, []WC{{QPN: 1 << 24}}), ErrProtocol},
		{"short", append(AppendHeader(nil, OpCompletions, 0, 0, 2), 0, 0), ErrProtocol},
		{"another op", AppendHeader(nil, OpPing|OpReply, 0, 0, 0), ErrProtocol},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			ours := os.NewFile(uintptr(fds[0]), "ours")
			c, err := net.FileConn(ours)
			ours.Close()
			if err != nil {
				t.Fatal(err)
			}
			// The fake: a pushing CQ's request brings the push socket; it
			// answers, then pushes tt.msg on it.
			go func() {
				defer unix.Close(fds[1])
				buf, oob := make([]byte, MaxMessage), make([]byte, unix.CmsgSpace(4))
				unix.Write(fds[1], helloMsg(Version))
				for {
					n, oobn, _, _, err := unix.Recvmsg(fds[1], buf, oob, 0)
					if err != nil || n == 0 {
						return
					}
					req := Header(buf[:HeaderSize])
					if req.Op() != OpCreateCQ {
						unix.Write(fds[1], reply(req, 0, nil))
						continue
					}
					unix.Write(fds[1], reply(req, 0, ne.AppendUint32(ne.AppendUint32(nil, 3), 64)))
					cm, err := unix.ParseSocketControlMessage(oob[:oobn])
					if err != nil || len(cm) != 1 {
						t.Errorf("a pushing CQ's request came with %d control messages (%v), want the push socket", len(cm), err)
						continue
					}
					pfd, err := unix.ParseUnixRights(&cm[0])
					if err != nil || len(pfd) != 1 {
						t.Errorf("no push socket: %v", err)
						continue
					}
					unix.Write(pfd[0], tt.msg)
					defer unix.Close(pfd[0])
				}
			}()
			h := newHelper(c.(*net.UnixConn))
			defer h.Close()
			if err := h.hello(); err != nil {
				t.Fatal(err)
			}
			d := &Device{Name: "rxe0", Attr: rxeAttr, h: h}
			got := make(chan pushedFake, 8)
			d.SetCompletionHandler(func(cq uint32, wcs []WC) {
				for _, w := range wcs {
					got <- pushedFake{cq, w}
				}
			})
			if cq, err := d.CreateCQ(64, true); err != nil || cq.Handle != 3 {
				t.Fatalf("CreateCQ(push) = %+v, %v", cq, err)
			}
			if tt.want == nil {
				for _, w := range good {
					select {
					case p := <-got:
						if p != (pushedFake{3, w}) {
							t.Errorf("the handler got %+v, want %+v", p, pushedFake{3, w})
						}
					case <-time.After(20 * time.Second):
						t.Fatal("no pushed completion in 20 s")
					}
				}
				if _, err := h.Call(AppendHeader(nil, OpPing, 0, 0, 0)); err != nil {
					t.Errorf("a call after the pushes: %v", err)
				}
				return
			}
			for end := time.Now().Add(20 * time.Second); ; time.Sleep(time.Millisecond) {
				_, err := h.Call(AppendHeader(nil, OpPing, 0, 0, 0))
				if errors.Is(err, tt.want) {
					break
				}
				if err != nil || time.Now().After(end) {
					t.Fatalf("after the bad push, a call gave %v, want %v", err, tt.want)
				}
			}
			if len(got) != 0 {
				t.Errorf("the handler got %+v from a push that broke the protocol", <-got)
			}
		})
	}
}

type pushedFake struct {
	cq uint32
	wc WC
}

// TestDataPathLyingHelper: a helper whose reply to a data-path request
// breaks the protocol (a body where none belongs, a CQ smaller than asked,
// a QP without a valid QPN) is ErrProtocol and is not asked again.
func TestDataPathLyingHelper(t *testing.T) {
	qp := QP{Handle: 1, QPN: 0x11}
	tests := []struct {
		name string
		body []byte
		call func(d *Device) error
	}{
		{"destroy CQ with a body", []byte{1, 2, 3, 4}, func(d *Device) error { return d.DestroyCQ(CQ{}) }},
		{"modify QP with a body", []byte{1}, func(d *Device) error { return d.ModifyQP(qp, QPAttr{State: QPStateInit}) }},
		{"destroy QP with a body", []byte{1}, func(d *Device) error { return d.DestroyQP(qp) }},
		{"post send with a body", []byte{1}, func(d *Device) error { return d.PostSend(qp, []SendWR{{Opcode: WRSend}}) }},
		{"post recv with a body", []byte{1}, func(d *Device) error { return d.PostRecv(qp, []RecvWR{{}}) }},
		{"small CQ", ne.AppendUint32(ne.AppendUint32(nil, 0), 8), func(d *Device) error { _, err := d.CreateCQ(64, false); return err }},
		{"QPN 0", make([]byte, qpSize), func(d *Device) error { _, err := d.CreateQP(CQ{}, CQ{}, QPCap{}); return err }},
		{"UD QPN 0", make([]byte, qpSize), func(d *Device) error { _, err := d.CreateUDQP(CQ{}, CQ{}, QPCap{}); return err }},
		{"AH with padding", []byte{7, 0, 0, 0, 1, 0, 0, 0}, func(d *Device) error { _, err := d.CreateAH(AHAttr{IsGlobal: true}); return err }},
		{"modify UD QP with a body", []byte{1}, func(d *Device) error { return d.ModifyUDQP(qp, QPStateInit, 1, 0) }},
		{"destroy AH with a body", []byte{1}, func(d *Device) error { return d.DestroyAH(AH{}) }},
		{"post UD send with a body", []byte{1}, func(d *Device) error { return d.PostSendUD(qp, []UDSendWR{{Opcode: WRSend}}) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := fakeHelper(t, helloMsg(Version), func(req Header, _ []byte) []byte { return reply(req, 0, tt.body) })
			if err := h.hello(); err != nil {
				t.Fatal(err)
			}
			d := &Device{Name: "rxe0", Attr: rxeAttr, h: h}
			if err := tt.call(d); !errors.Is(err, ErrProtocol) {
				t.Fatalf("got %v, want ErrProtocol", err)
			}
			if _, err := h.Call(AppendHeader(nil, OpPing, 0, 0, 0)); !errors.Is(err, ErrProtocol) {
				t.Errorf("a call after the lie: %v, want ErrProtocol", err)
			}
		})
	}
}

// TestDeviceLimits: a QP asking for more work requests or SGEs than the
// device has, or an atomic on a device without atomics, is refused before
// the helper is asked, saying what the device has.
func TestDeviceLimits(t *testing.T) {
	asked := 0
	h := fakeHelper(t, helloMsg(Version), func(req Header, _ []byte) []byte { asked++; return reply(req, 0, nil) })
	if err := h.hello(); err != nil {
		t.Fatal(err)
	}
	attr := rxeAttr
	attr.MaxQPWR, attr.MaxSGE, attr.AtomicCap = 1024, 4, 0
	d := &Device{Name: "siw0", Attr: attr, h: h}
	qp := QP{Handle: 1, QPN: 0x11}
	tests := []struct {
		name, want string
		err        error
	}{
		{"send WRs", "at most 1024 work requests", func() error { _, err := d.CreateQP(CQ{}, CQ{}, QPCap{MaxSendWR: 1025}); return err }()},
		{"recv WRs", "at most 1024 work requests", func() error { _, err := d.CreateQP(CQ{}, CQ{}, QPCap{MaxRecvWR: 4096}); return err }()},
		{"SGEs", "at most 4 SGEs", func() error { _, err := d.CreateQP(CQ{}, CQ{}, QPCap{MaxSendWR: 1, MaxRecvSGE: 5}); return err }()},
		{"atomic", "siw0 has no atomics", d.PostSend(qp, []SendWR{{Opcode: WRSend}, {Opcode: WRAtomicFetchAdd}})},
		{"UD SGEs", "at most 4 SGEs", func() error { _, err := d.CreateUDQP(CQ{}, CQ{}, QPCap{MaxSendWR: 1, MaxSendSGE: 5}); return err }()},
		{"UD on iWARP", "iWARP device: it has no UD QPs", func() error {
			iw := &Device{Name: "siw0", Attr: attr, h: h}
			iw.Attr.Transport = TransportIWARP
			_, err := iw.CreateUDQP(CQ{}, CQ{}, QPCap{MaxSendWR: 1})
			if e := (*Error)(nil); errors.As(err, &e) && e.Errno != int32(unix.EOPNOTSUPP) {
				t.Errorf("UD on iWARP: errno %d, want EOPNOTSUPP as rdma-core gives it", e.Errno)
			}
			return err
		}()},
	}
	for _, tt := range tests {
		var e *Error
		if !errors.Is(tt.err, ErrDevice) || !errors.As(tt.err, &e) || !strings.Contains(e.Msg, tt.want) {
			t.Errorf("%s: %v, want ErrDevice saying %q", tt.name, tt.err, tt.want)
		}
	}
	if asked != 0 {
		t.Errorf("the helper was asked %d times", asked)
	}
}
