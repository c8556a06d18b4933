package uplink

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"os/exec"
	"testing"

	"golang.org/x/sys/unix"
)

// rcFrame builds an RC frame with opcode op to QP qpn at PSN psn: the BTH,
// zeroed extended headers, the payload, its pad and the ICRC; IPv4 (ID id,
// DF, TTL 64) or IPv6 (hop limit 64) by the addresses' family.
func rcFrame(src, dst netip.Addr, id, sport uint16, op byte, qpn, psn uint32, payload []byte) []byte {
	hdrLen := map[byte]int{0x04: 12, 0x06: 28, 0x07: 12, 0x08: 12, 0x0d: 16, 0x0e: 12, 0x0f: 16, 0x11: 16, 0x00: 12, 0x01: 12, 0x02: 12}[op]
	pad := -len(payload) & 3
	udp := 8 + hdrLen + len(payload) + pad + 4
	hl := 20
	if src.Is6() {
		hl = 40
	}
	f := make([]byte, hl+udp)
	if hl == 20 {
		f[0] = 0x45
		binary.BigEndian.PutUint16(f[2:], uint16(len(f)))
		binary.BigEndian.PutUint16(f[4:], id)
		f[6], f[8], f[9] = 0x40, 64, 17
		s, d := src.As4(), dst.As4()
		copy(f[12:16], s[:])
		copy(f[16:20], d[:])
		binary.BigEndian.PutUint16(f[10:], ipChecksum(f[:20]))
	} else {
		f[0] = 0x60
		binary.BigEndian.PutUint16(f[4:], uint16(udp))
		f[6], f[7] = 17, 64
		s, d := src.As16(), dst.As16()
		copy(f[8:24], s[:])
		copy(f[24:40], d[:])
	}
	u := f[hl:]
	binary.BigEndian.PutUint16(u[0:], sport)
	binary.BigEndian.PutUint16(u[2:], DefaultPort)
	binary.BigEndian.PutUint16(u[4:], uint16(udp))
	b := u[8:]
	b[0], b[1], b[2], b[3] = op, byte(pad)<<4, 0xff, 0xff
	b[5], b[6], b[7] = byte(qpn>>16), byte(qpn>>8), byte(qpn)
	b[9], b[10], b[11] = byte(psn>>16), byte(psn>>8), byte(psn)
	copy(b[hdrLen:], payload)
	binary.LittleEndian.PutUint32(f[len(f)-4:], testICRC(f))
	return f
}

// writeMessage returns the frames of an RDMA WRITE of n bytes at path MTU
// mtu: FIRST, MIDDLEs, LAST (or ONLY when it fits one packet). IPv4 IDs
// count from id.
func writeMessage(src, dst netip.Addr, id, sport uint16, qpn, psn uint32, mtu, n int) [][]byte {
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(i*7 + int(qpn))
	}
	if n <= mtu {
		return [][]byte{rcFrame(src, dst, id, sport, 0x0a, qpn, psn, data)}
	}
	var fs [][]byte
	for off := 0; off < n; off += mtu {
		op := byte(0x07)
		switch {
		case off == 0:
			op = 0x06
		case off+mtu >= n:
			op = 0x08
		}
		fs = append(fs, rcFrame(src, dst, id, sport, op, qpn, psn, data[off:min(off+mtu, n)]))
		id++
		psn = (psn + 1) & 0xffffff
	}
	return fs
}

// normalized returns a copy of f without what a GSO send may change: the
// IPv4 ID and header checksum, the UDP checksum and the ICRC.
func normalized(f []byte) []byte {
	g := append([]byte(nil), f...)
	hl := 40
	if g[0]>>4 == 4 {
		hl = 20
		g[4], g[5], g[10], g[11] = 0, 0, 0, 0
	}
	g[hl+6], g[hl+7] = 0, 0
	copy(g[len(g)-4:], []byte{0, 0, 0, 0})
	return g
}

// wireRuns sends frames as the GSO sender would, but into memory: each run
// becomes one buffer, as a veth pair hands it to the peer (IPv4: ID 0, the
// ICRCs rewritten), other frames stay as they are.
func wireRuns(frames [][]byte) (bufs [][]byte, runs int) {
	for i := 0; i < len(frames); {
		k := gsoRun(frames[i:], gsoMaxSegs)
		if k < 2 {
			bufs = append(bufs, append([]byte(nil), frames[i]...))
			i++
			continue
		}
		run := make([][]byte, k)
		for j := range run {
			run[j] = append([]byte(nil), frames[i+j]...)
		}
		hl := runHeader(run[0])
		if hl == 20 {
			setRunIDs(run, make([]uint32, k))
		}
		b := append([]byte(nil), run[0][:hl+8]...)
		for _, f := range run {
			b = append(b, f[hl+8:]...)
		}
		if hl == 20 {
			binary.BigEndian.PutUint16(b[2:], uint16(len(b)))
			b[4], b[5] = 0, 0
		} else {
			binary.BigEndian.PutUint16(b[4:], uint16(len(b)-40))
		}
		binary.BigEndian.PutUint16(b[hl+4:], uint16(len(b)-hl))
		bufs = append(bufs, b)
		runs++
		i += k
	}
	return bufs, runs
}

// cut delivers what the receiver makes of bufs.
func cut(bufs [][]byte) (got [][]byte, split int) {
	for _, b := range bufs {
		hl := 20
		if b[0]>>4 == 6 {
			hl = 40
		}
		if s := splitSize(b, hl); s != 0 {
			split++
			forSegments(b, hl, s, func(f []byte) { got = append(got, append([]byte(nil), f...)) })
			continue
		}
		got = append(got, b)
	}
	return got, split
}

// mixedBatch is a batch of two messages' frames interleaved with others: an
// acknowledgement, a SEND Only, a 200 000-byte WRITE at MTU 1024 (two runs:
// one GSO send carries at most 64 KiB), and a WRITE at MTU 256 whose LAST
// is a full MTU.
func mixedBatch(src, dst netip.Addr) ([][]byte, int) {
	var fs [][]byte
	fs = append(fs, rcFrame(src, dst, 1, 0xC001, 0x11, 0x22, 7, nil))
	fs = append(fs, writeMessage(src, dst, 2, 0xC001, 0x11, 0xfffff0, 1024, 200000)...)
	fs = append(fs, rcFrame(src, dst, 500, 0xC002, 0x04, 0x33, 9, []byte("hello")))
	fs = append(fs, writeMessage(src, dst, 600, 0xC003, 0x44, 100, 256, 256*5)...)
	// The first message's FIRST goes alone, then its 194 MIDDLEs and LAST
	// in runs of 62, 62, 62 and 9 (62 segments of 1040 bytes fill a GSO
	// send); the second's FIRST alone, three MIDDLEs and the LAST in one
	// run: 5 runs.
	_, runs := wireRuns(fs)
	return fs, runs
}

func TestGSORunsSplitBackIntoTheirFrames(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		src, dst := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
		if v6 {
			src, dst = netip.MustParseAddr("fd00::1"), netip.MustParseAddr("fd00::2")
		}
		frames, runs := mixedBatch(src, dst)
		if runs != 5 {
			t.Fatalf("v6=%v: %d runs, want 5 (see mixedBatch)", v6, runs)
		}
		bufs, _ := wireRuns(frames)
		got, split := cut(bufs)
		if split != runs || len(got) != len(frames) {
			t.Fatalf("v6=%v: %d buffers split into %d frames, want %d and %d", v6, split, len(got), runs, len(frames))
		}
		for i := range frames {
			if !bytes.Equal(normalized(got[i]), normalized(frames[i])) {
				t.Fatalf("v6=%v: frame %d differs:\n got %x\nwant %x", v6, i, got[i], frames[i])
			}
			if !icrcOK(got[i]) {
				t.Fatalf("v6=%v: frame %d: ICRC does not verify", v6, i)
			}
			if v6 && !bytes.Equal(got[i], frames[i]) {
				t.Fatalf("v6: frame %d is not byte for byte what was sent", i)
			}
		}
	}
}

// A MIDDLE packet of one MTU whose payload holds what looks like the next
// segments' BTHs is one packet: its ICRC says so.
func TestSplitSizeKeepsAPacketThatLooksLikeARun(t *testing.T) {
	src, dst := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	// Two MIDDLEs of MTU 256 back to back are 2*272 bytes: a MIDDLE of MTU
	// 512 (528 bytes) is shorter, so build MTU 1024 from four of 256.
	run := writeMessage(src, dst, 1, 0xC000, 0x55, 10, 256, 256*6)[1:5] // four MIDDLEs
	var payload []byte
	for _, f := range run {
		payload = append(payload, f[28:]...)
	}
	payload = payload[12 : 12+1024] // the first BTH is the packet's own
	f := rcFrame(src, dst, 9, 0xC000, 0x07, 0x55, 11, payload)
	// Is the payload still aligned so that the chain check passes?
	if !segmentsChain(f[28:], 272, 11) {
		t.Skip("the crafted payload does not chain")
	}
	if s := splitSize(f, 20); s != 0 {
		t.Fatalf("splitSize = %d, want 0 for one MTU-1024 MIDDLE whose ICRC verifies", s)
	}
}

func TestGSORunRules(t *testing.T) {
	a, b := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	msg := writeMessage(a, b, 1, 0xC000, 0x11, 5, 1024, 4*1024+100) // FIRST, 3 MIDDLE, LAST
	other := writeMessage(a, b, 1, 0xC000, 0x12, 9, 1024, 3*1024)   // another QP
	mut := func(f []byte, do func([]byte)) []byte {
		g := append([]byte(nil), f...)
		do(g)
		return g
	}
	tests := []struct {
		name   string
		frames [][]byte
		want   int
	}{
		{"FIRST starts no run (longer than the MIDDLEs)", msg, 1},
		{"MIDDLEs and the LAST", msg[1:], 4},
		{"stops at another QP", append(append([][]byte{}, msg[1:3]...), other[1:]...), 2},
		{"stops at a PSN gap", [][]byte{msg[1], msg[3], msg[4]}, 1},
		{"a short LAST ends the run", [][]byte{msg[3], msg[4], msg[2]}, 2},
		{"FIRST and a short LAST", [][]byte{msg[0], mut(msg[4], func(f []byte) { f[39] = 6 })}, 2},
		{"another source port", [][]byte{msg[1], mut(msg[2], func(f []byte) { f[21]++ })}, 1},
		{"another TOS", [][]byte{msg[1], mut(msg[2], func(f []byte) { f[1] = 4 })}, 1},
		{"no DF", [][]byte{mut(msg[1], func(f []byte) { f[6] = 0 }), msg[2]}, 1},
		{"padded", [][]byte{mut(msg[1], func(f []byte) { f[29] |= 0x10 }), msg[2]}, 1},
		{"alone", msg[1:2], 1},
		{"at most max", msg[1:], 4},
	}
	for _, tt := range tests {
		if got := gsoRun(tt.frames, gsoMaxSegs); got != tt.want {
			t.Errorf("%s: gsoRun = %d, want %d", tt.name, got, tt.want)
		}
	}
	if got := gsoRun(msg[1:], 3); got != 3 {
		t.Errorf("gsoRun(max 3) = %d", got)
	}
}

// FuzzSplitSize: whatever arrives, splitSize and forSegments stay inside
// the buffer and every packet they make has its lengths right.
func FuzzSplitSize(f *testing.F) {
	a, b := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	bufs, _ := wireRuns(writeMessage(a, b, 1, 0xC000, 0x11, 5, 256, 256*6))
	for _, x := range bufs {
		f.Add(x)
	}
	a6, b6 := netip.MustParseAddr("fd00::1"), netip.MustParseAddr("fd00::2")
	bufs, _ = wireRuns(writeMessage(a6, b6, 1, 0xC000, 0x11, 5, 256, 256*6))
	for _, x := range bufs {
		f.Add(x)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 || len(b) > 0xffff {
			return
		}
		hl := 20
		if b[0]>>4 == 6 {
			hl = 40
		}
		s := splitSize(b, hl)
		if s == 0 {
			return
		}
		total := 0
		forSegments(b, hl, s, func(p []byte) {
			udp := int(binary.BigEndian.Uint16(p[hl+4:]))
			if udp != len(p)-hl || udp-8 > s || udp-8 < minSegment {
				t.Fatalf("segment of %d bytes, UDP length %d, segment size %d", len(p), udp, s)
			}
			total += udp - 8
		})
		if total != len(b)-hl-8 {
			t.Fatalf("segments carry %d bytes of %d", total, len(b)-hl-8)
		}
	})
}

// A batch of mixed runs goes out as one GSO send per run and arrives as
// the frames that were sent, whether the veth pair hands the buffers over
// whole (the receiver cuts them) or the sender's interface cuts them
// (tx-udp-segmentation off: what a NIC without USO does), and whether the
// receiver takes GSO buffers whole or not.
func TestLinkGSOCarriesRuns(t *testing.T) {
	tests := []struct {
		name          string
		v6            bool
		cutOnTx       bool
		receiverGSO   bool
		wantRxBuffers bool
	}{
		{"IPv4 whole", false, false, true, true},
		{"IPv6 whole", true, false, true, true},
		{"IPv4 cut by the sender's interface", false, true, true, false},
		{"IPv6 cut by the sender's interface", true, true, true, false},
		{"IPv4 to a receiver without GSO", false, false, false, true},
		{"IPv6 to a receiver without GSO", true, false, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newTestNet(t)
			if tt.cutOnTx {
				if _, err := exec.LookPath("ethtool"); err != nil {
					t.Skip("needs ethtool to turn tx-udp-segmentation off")
				}
				if out, err := exec.Command("ip", "netns", "exec", n.a.ns, "ethtool", "-K", n.a.dev, "tx-udp-segmentation", "off").CombinedOutput(); err != nil {
					t.Fatalf("ethtool: %v: %s", err, out)
				}
			}
			la := openIn(t, n.a.ns, Config{Name: "a", Netdev: n.a.dev, GSO: true})
			lb := openIn(t, n.b.ns, Config{Name: "b", Netdev: n.b.dev, GSO: tt.receiverGSO})
			cb := serve(t, lb)
			src, dst := n.a.v4, n.b.v4
			if tt.v6 {
				src, dst = n.a.v6, n.b.v6
			}
			frames, runs := mixedBatch(src, dst)
			// Warm up the neighbour cache: a first send would wait for
			// it and the kernel queues only a few packets meanwhile.
			warm := rcFrame(src, dst, 1, 0xC009, 0x11, 1, 1, nil)
			send(t, la, warm)
			cb.next(t)
			sent := make([][]byte, len(frames))
			for i, f := range frames {
				sent[i] = append([]byte(nil), f...)
			}
			send(t, la, frames...)
			for i := range frames {
				if !bytes.Equal(frames[i], sent[i]) {
					t.Fatalf("WriteBatch changed frame %d", i)
				}
			}
			for i := range frames {
				got := cb.next(t)
				if !bytes.Equal(normalized(got), normalized(frames[i])) {
					t.Fatalf("frame %d differs:\n got %x\nwant %x", i, got, frames[i])
				}
				if !icrcOK(got) {
					t.Fatalf("frame %d: ICRC does not verify", i)
				}
				// Cut by the receiver, an IPv6 frame is the frame sent
				// (the UDP checksum 0 again, as the engine wrote it).
				if tt.v6 && tt.wantRxBuffers && !bytes.Equal(got, frames[i]) {
					t.Fatalf("frame %d is not byte for byte what was sent:\n got %x\nwant %x", i, got, frames[i])
				}
			}
			cb.none(t)
			waitFor(t, "the counters", func() bool { return lb.Stats().RxPackets == uint64(len(frames)+1) })
			sa, sb := la.Stats(), lb.Stats()
			if sa.TxPackets != uint64(len(frames)+1) || sa.TxGSO != uint64(runs) || sa.TxErrors != 0 {
				t.Errorf("sender stats %+v, want %d packets in %d GSO sends", sa, len(frames)+1, runs)
			}
			wantRx := uint64(0)
			if tt.wantRxBuffers {
				wantRx = uint64(runs)
			}
			if sb.RxGSO != wantRx || sb.RxDropped != 0 {
				t.Errorf("receiver stats %+v, want %d GSO buffers cut", sb, wantRx)
			}
		})
	}
}

// GRO merges DF packets of one fixed ID too: a buffer whose segments all
// carry its ID is cut into packets with that ID, found from the second
// segment's ICRC.
func TestForSegmentsFindsFixedIDs(t *testing.T) {
	src, dst := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	for _, fixed := range []uint16{0, 7, 0x8001, 0xffff} {
		frames := writeMessage(src, dst, 1, 0xC000, 0x11, 5, 1024, 5*1024)[1:] // MIDDLEs and the LAST
		for _, f := range frames {
			binary.BigEndian.PutUint16(f[4:], fixed)
			binary.LittleEndian.PutUint32(f[len(f)-4:], testICRC(f))
		}
		b := append([]byte(nil), frames[0][:28]...)
		for _, f := range frames {
			b = append(b, f[28:]...)
		}
		binary.BigEndian.PutUint16(b[2:], uint16(len(b)))
		binary.BigEndian.PutUint16(b[24:], uint16(len(b)-20))
		s := splitSize(b, 20)
		if s != len(frames[0])-28 {
			t.Fatalf("splitSize = %d, want %d", s, len(frames[0])-28)
		}
		i := 0
		forSegments(b, 20, s, func(f []byte) {
			if id := binary.BigEndian.Uint16(f[4:]); id != fixed || !icrcOK(f) {
				t.Errorf("ID %#x: segment %d has ID %#x, ICRC ok %v", fixed, i, id, icrcOK(f))
			}
			i++
		})
	}
}

// A GSO socket is bound to the interface's index: when the interface goes
// and comes back under its name (a new index), the link sends its runs on
// new sockets.
func TestLinkGSOFollowsARecreatedInterface(t *testing.T) {
	n := newTestNet(t)
	la := openIn(t, n.a.ns, Config{Name: "a", Netdev: n.a.dev, GSO: true})
	lb := openIn(t, n.b.ns, Config{Name: "b", Netdev: n.b.dev, GSO: true})
	cb := serve(t, lb)
	run := func() {
		t.Helper()
		frames := writeMessage(n.a.v4, n.b.v4, 1, 0xC000, 0x11, 5, 1024, 8*1024)
		before := la.Stats().TxGSO
		send(t, la, rcFrame(n.a.v4, n.b.v4, 1, 0xC009, 0x11, 1, 1, nil)) // the neighbour cache
		cb.next(t)
		send(t, la, frames...)
		for i := range frames {
			if got := cb.next(t); !bytes.Equal(normalized(got), normalized(frames[i])) || !icrcOK(got) {
				t.Fatalf("frame %d differs or its ICRC does not verify:\n got %x\nwant %x", i, got, frames[i])
			}
		}
		if la.Stats().TxGSO == before {
			t.Fatal("no GSO send")
		}
	}
	run()
	old := ifindex(t, n.a.ns, n.a.dev)
	ip(t, "-n", n.a.ns, "link", "del", n.a.dev) // and its peer
	waitFor(t, "the links to see the interfaces go", func() bool { return !la.State().Netdev && !lb.State().Netdev })
	ip(t, "link", "add", n.a.dev, "address", n.a.mac.String(), "netns", n.a.ns, "type", "veth",
		"peer", "name", n.b.dev, "address", n.b.mac.String(), "netns", n.b.ns)
	for _, s := range []*side{&n.a, &n.b} {
		ip(t, "-n", s.ns, "link", "set", s.dev, "addrgenmode", "none")
		ip(t, "-n", s.ns, "addr", "add", s.v4.String()+"/24", "dev", s.dev)
		ip(t, "-n", s.ns, "link", "set", s.dev, "up")
	}
	if ifindex(t, n.a.ns, n.a.dev) == old {
		t.Fatal("the new interface has the old index")
	}
	waitFor(t, "the links to see the new interfaces", func() bool {
		return la.State().Active && lb.State().Active && len(la.GIDs()) > 1 && len(lb.GIDs()) > 1
	})
	run()
}

// A GSO send the kernel refuses (here: a socket told not to checksum,
// which GSO needs) does not fail the batch: the run goes on the raw
// socket, frame by frame, as do the flow's later runs.
func TestLinkGSOFallsBackWhenRefused(t *testing.T) {
	n := newTestNet(t)
	la := openIn(t, n.a.ns, Config{Name: "a", Netdev: n.a.dev, GSO: true})
	lb := openIn(t, n.b.ns, Config{Name: "b", Netdev: n.b.dev, GSO: true})
	cb := serve(t, lb)
	send(t, la, rcFrame(n.a.v4, n.b.v4, 1, 0xC009, 0x11, 1, 1, nil)) // the neighbour cache
	cb.next(t)
	frames := writeMessage(n.a.v4, n.b.v4, 1, 0xC000, 0x11, 5, 1024, 8*1024)
	send(t, la, frames[:1]...)
	send(t, la, frames[1:3]...) // makes the flow's socket
	if la.Stats().TxGSO != 1 {
		t.Fatalf("TxGSO %d, want 1", la.Stats().TxGSO)
	}
	la.tx.mu.Lock()
	for _, s := range la.tx.gso.socks {
		if s.rc != nil {
			_ = s.rc.Control(func(fd uintptr) { _ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_NO_CHECK, 1) })
		}
	}
	la.tx.mu.Unlock()
	send(t, la, frames[3:]...)
	send(t, la, frames[3:]...) // again: the flow's socket is no longer tried
	for i, f := range append(append([][]byte{}, frames...), frames[3:]...) {
		got := cb.next(t)
		if i < 3 {
			if !bytes.Equal(normalized(got), normalized(f)) || !icrcOK(got) {
				t.Fatalf("frame %d differs or its ICRC does not verify", i)
			}
			continue
		}
		if !bytes.Equal(got, f) {
			t.Fatalf("frame %d is not byte for byte what was sent (on the raw socket):\n got %x\nwant %x", i, got, f)
		}
	}
	if s := la.Stats(); s.TxGSO != 1 || s.TxErrors != 0 || s.TxPackets != uint64(1+len(frames)+len(frames)-3) {
		t.Errorf("stats %+v, want 1 GSO send, no errors, every frame counted once", s)
	}
}
