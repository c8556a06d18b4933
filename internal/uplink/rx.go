package uplink

import (
	"encoding/binary"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// bufSize is one receive buffer: the largest IP packet, which a GSO
// buffer arriving whole (see segment.go) may be, behind the room an IPv6
// reader leaves for the fixed header. A reader holds 64 of them (4.2 MB,
// 8.4 MB per link): fresh from the OS, pages a packet never reaches stay
// untouched, but memory the Go heap reuses is zeroed, and so resident.
const bufSize = ipv6HeaderLen + 0xffff + 1

// ipv6HeaderLen is the fixed IPv6 header a reader puts back in front of
// what a raw IPv6 socket returns (the UDP header on).
const ipv6HeaderLen = 40

// reader receives one address family's packets with recvmmsg into a fixed
// set of buffers and hands each whole IP packet to deliver.
type reader struct {
	l    *Link
	v6   bool
	file *os.File
	rc   syscall.RawConn

	bufs [batchSize][bufSize]byte
	m    msgBatch
	info rxInfo6

	// Results of the last recvmmsg, set by readFn.
	n     int
	errno unix.Errno
	// readFn is the RawConn callback, made once so that a read allocates
	// nothing.
	readFn func(fd uintptr) bool

	// The segments of a GSO buffer go to deliver through deliverSeg,
	// made once, which counts them.
	deliver        func([]byte)
	deliverSeg     func([]byte)
	segs, segBytes uint64
}

func newReader(l *Link, f *os.File, v6 bool) (*reader, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	r := &reader{l: l, v6: v6, file: f, rc: rc}
	for i := range r.m.msgs {
		if v6 {
			r.m.setBuf(i, r.bufs[i][ipv6HeaderLen:])
			r.m.setName6(i)
			r.m.setCtl(i)
		} else {
			r.m.setBuf(i, r.bufs[i][:])
		}
	}
	r.deliverSeg = func(f []byte) {
		r.deliver(f)
		r.segs++
		r.segBytes += uint64(len(f))
	}
	r.readFn = func(fd uintptr) bool {
		if r.v6 {
			for i := range r.m.msgs {
				r.m.msgs[i].hdr.Namelen = unix.SizeofSockaddrInet6
				r.m.msgs[i].hdr.SetControllen(ctlSize)
			}
		}
		n, errno := recvmmsg(fd, r.m.msgs[:])
		if errno == unix.EAGAIN {
			return false // wait until the socket is readable
		}
		r.n, r.errno = n, errno
		return true
	}
	return r, nil
}

// run reads until the socket is closed.
func (r *reader) run(deliver func([]byte)) {
	r.deliver = deliver
	for {
		if err := r.rc.Read(r.readFn); err != nil {
			return // closed
		}
		switch r.errno {
		case 0:
		case unix.EINTR:
			continue
		default:
			// Nothing a datagram socket returns here is expected to
			// last (ENOMEM, ENOBUFS); count it and do not spin.
			r.l.stats.rxErrors.Add(1)
			time.Sleep(time.Millisecond)
			continue
		}
		if r.v6 {
			r.deliver6(deliver)
		} else {
			r.deliver4(deliver)
		}
	}
}

func (r *reader) deliver4(deliver func([]byte)) {
	r.l.deliverMu.Lock()
	defer r.l.deliverMu.Unlock()
	s := r.l.snap.Load()
	var pkts, bytes, notOurs, dropped uint64
	for i := 0; i < r.n; i++ {
		msg := &r.m.msgs[i]
		n := int(msg.n)
		b := r.bufs[i][:n]
		switch {
		case msg.hdr.Flags&unix.MSG_TRUNC != 0 || n < 28 || b[0]>>4 != 4:
			dropped++
		case !s.has4(b[16:20]) && !r.l.groups.has4(b[16:20]):
			notOurs++
		default:
			if b[0] == 0x45 {
				if seg := splitSize(b, 20); seg != 0 {
					r.segs, r.segBytes = 0, 0
					forSegments(b, 20, seg, r.deliverSeg)
					pkts += r.segs
					bytes += r.segBytes
					r.l.stats.rxGSO.Add(1)
					continue
				}
			}
			deliver(b)
			pkts++
			bytes += uint64(n)
		}
	}
	r.l.stats.count(pkts, bytes, notOurs, dropped)
}

func (r *reader) deliver6(deliver func([]byte)) {
	r.l.deliverMu.Lock()
	defer r.l.deliverMu.Unlock()
	s := r.l.snap.Load()
	var pkts, bytes, notOurs, dropped uint64
	info := &r.info
	for i := 0; i < r.n; i++ {
		msg := &r.m.msgs[i]
		n := int(msg.n)
		parseCmsgs6(r.m.ctl[i][:msg.hdr.Controllen], info)
		switch {
		case msg.hdr.Flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0 || n < 8 || info.has&hasPktinfo == 0:
			dropped++
			continue
		case !s.has6(&info.dst) && !r.l.groups.has6(&info.dst):
			notOurs++
			continue
		}
		// Put back the fixed header the socket stripped: every field
		// the ICRC covers (payload length, next header, addresses) is
		// known, and the control messages give the rest.
		b := r.bufs[i][:ipv6HeaderLen+n]
		if info.has&hasFlowinfo != 0 {
			copy(b[0:4], info.flowinfo[:])
		} else {
			clear(b[0:4])
		}
		b[0] = 0x60 | b[0]&0x0f
		binary.BigEndian.PutUint16(b[4:6], uint16(n))
		b[6] = unix.IPPROTO_UDP
		b[7] = 64
		if info.has&hasHopLimit != 0 {
			b[7] = info.hopLimit
		}
		copy(b[8:24], r.m.names6[i].Addr[:])
		copy(b[24:40], info.dst[:])
		if seg := splitSize(b, ipv6HeaderLen); seg != 0 {
			r.segs, r.segBytes = 0, 0
			forSegments(b, ipv6HeaderLen, seg, r.deliverSeg)
			pkts += r.segs
			bytes += r.segBytes
			r.l.stats.rxGSO.Add(1)
			continue
		}
		deliver(b)
		pkts++
		bytes += uint64(len(b))
	}
	r.l.stats.count(pkts, bytes, notOurs, dropped)
}
