package uplink

import (
	"encoding/binary"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// sender sends frames with sendmmsg on two raw sockets that take the IP
// header from the frame, one per address family.
type sender struct {
	mu       sync.Mutex // one batch at a time: the arrays below are shared
	f4, f6   *os.File
	rc4, rc6 syscall.RawConn
	m        msgBatch

	// The run of messages the next sendmmsg sends and its results.
	off, end int
	n        int
	errno    unix.Errno
	writeFn  func(fd uintptr) bool

	gso *gsoSender // nil unless the link sends GSO runs (Config.GSO)
}

// newSender opens the send sockets. Their packets get the socket priority
// dscp>>3 (the DSCP's class selector), which a VLAN device's egress-qos-map
// turns into the 802.1Q PCP, so that the link's traffic can ride a lossless
// (PFC) class when tagged.
func newSender(dscp uint8) (*sender, error) {
	f4, err := openTx(unix.AF_INET, int(dscp>>3))
	if err != nil {
		return nil, err
	}
	f6, err := openTx(unix.AF_INET6, int(dscp>>3))
	if err != nil {
		f4.Close()
		return nil, err
	}
	s := &sender{f4: f4, f6: f6}
	if s.rc4, err = f4.SyscallConn(); err == nil {
		s.rc6, err = f6.SyscallConn()
	}
	if err != nil {
		s.close()
		return nil, err
	}
	s.writeFn = func(fd uintptr) bool {
		n, errno := sendmmsg(fd, s.m.msgs[s.off:s.end])
		if errno == unix.EAGAIN {
			return false // wait until the socket has room
		}
		s.n, s.errno = n, errno
		return true
	}
	return s, nil
}

// close closes the sockets without taking s.mu: a write may hold it while
// it waits for room in a socket buffer, and closing the socket ends that
// wait.
func (s *sender) close() {
	s.f4.Close()
	s.f6.Close()
	if s.gso != nil {
		s.gso.close()
	}
}

// bindTo makes both sockets send through interface ifindex only, as rxe
// routes with the netdev as output interface.
func (s *sender) bindTo(ifindex int) error {
	if s.gso != nil {
		s.gso.bindTo(ifindex)
	}
	for _, rc := range []syscall.RawConn{s.rc4, s.rc6} {
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_BINDTOIFINDEX, ifindex)
		}); err != nil {
			return err
		}
		if serr != nil {
			return serr
		}
	}
	return nil
}

// family returns 4 or 6 for a frame WriteBatch can send, or 0 and the
// reason it cannot.
func frameFamily(f []byte) (int, string) {
	if len(f) == 0 {
		return 0, "empty"
	}
	switch f[0] >> 4 {
	case 4:
		ihl := int(f[0]&0x0f) * 4
		switch {
		case len(f) < 20 || ihl < 20 || ihl > len(f):
			return 0, "IPv4 header cut short"
		case int(binary.BigEndian.Uint16(f[2:4])) != len(f):
			return 0, "IPv4 total length is not the frame's length"
		case f[4] == 0 && f[5] == 0:
			// The kernel would pick an ID the ICRC does not cover.
			return 0, "IPv4 identification is 0: the engine must number its packets"
		}
		return 4, ""
	case 6:
		switch {
		case len(f) < ipv6HeaderLen:
			return 0, "IPv6 header cut short"
		case ipv6HeaderLen+int(binary.BigEndian.Uint16(f[4:6])) != len(f):
			return 0, "IPv6 payload length is not the frame's length less 40"
		}
		return 6, ""
	}
	return 0, "not an IPv4 or IPv6 packet"
}

// gsoRunAt returns the length of the GSO run frames start with and the
// socket to send it on; nil if they start none or the link sends none.
func (s *sender) gsoRunAt(frames [][]byte) (int, *gsoSock) {
	if s.gso == nil {
		return 0, nil
	}
	k := gsoRun(frames, gsoMaxSegs)
	if k < 2 {
		return 0, nil
	}
	sock := s.gso.sock(frames[0], runHeader(frames[0]))
	if sock == nil {
		return 0, nil
	}
	return k, sock
}

// write sends frames and returns how many went. On an error it stops at
// the frame that failed; the frames after it are not sent.
func (s *sender) write(l *Link, frames [][]byte, ifindex int) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sent := 0
	for sent < len(frames) {
		fam, why := frameFamily(frames[sent])
		if fam == 0 {
			return sent, &FrameError{Index: sent, Reason: why}
		}
		if k, sock := s.gsoRunAt(frames[sent:]); sock != nil {
			run := frames[sent : sent+k]
			if err := s.gso.send(sock, run, runHeader(run[0])); err != nil {
				if refusedGSO(err) {
					// Nothing of the run went: it goes on the raw
					// socket, and so will the flow's next runs.
					s.gso.refuse(sock)
					continue
				}
				if err != ErrClosed {
					l.stats.txErrors.Add(1)
				}
				return sent, err
			}
			var bytes uint64
			for _, f := range run {
				bytes += uint64(len(f))
			}
			l.stats.txPackets.Add(uint64(k))
			l.stats.txBytes.Add(bytes)
			l.stats.txGSO.Add(1)
			sent += k
			continue
		}
		// A run of frames of one family, at most one batch, up to the
		// next GSO run.
		k := 0
		var bytes uint64
		for k < batchSize && sent+k < len(frames) {
			f := frames[sent+k]
			if ff, _ := frameFamily(f); ff != fam {
				break
			}
			if k > 0 && s.gso != nil {
				if _, sock := s.gsoRunAt(frames[sent+k : min(sent+k+2, len(frames))]); sock != nil {
					break
				}
			}
			s.m.setBuf(k, f)
			if fam == 4 {
				s.m.setName4(k)
				s.m.names4[k] = unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: [4]byte(f[16:20])}
			} else {
				s.m.setName6(k)
				s.m.names6[k] = unix.RawSockaddrInet6{Family: unix.AF_INET6, Addr: [16]byte(f[24:40])}
				if f[24] == 0xfe && f[25]&0xc0 == 0x80 || f[24] == 0xff && f[25]&0x0f <= 2 {
					s.m.names6[k].Scope_id = uint32(ifindex) // link-local
				}
			}
			bytes += uint64(len(f))
			k++
		}
		rc := s.rc4
		if fam == 6 {
			rc = s.rc6
		}
		s.off, s.end = 0, k
		for s.off < s.end {
			if err := rc.Write(s.writeFn); err != nil {
				s.m.clearBufs(k)
				return sent + s.off, ErrClosed
			}
			if s.errno != 0 {
				if s.errno == unix.EINTR {
					continue
				}
				s.m.clearBufs(k)
				l.stats.txErrors.Add(1)
				return sent + s.off, os.NewSyscallError("sendmmsg", s.errno)
			}
			s.off += s.n
		}
		s.m.clearBufs(k)
		l.stats.txPackets.Add(uint64(k))
		l.stats.txBytes.Add(bytes)
		sent += k
	}
	return sent, nil
}
