package daemon

// ibv_import_device, ibv_import_pd and ibv_import_mr (docs/design/import.md).
// A context's command descriptor is its connection to the daemon; a
// process that holds it (passed with SCM_RIGHTS, or a dup) imports the
// context by sending, on it, a socket of its own, which the daemon serves
// from then on as another connection to the same session: the same device,
// the same objects under the same handles, charged to the session's tenant.
// The reply goes on the new socket, so that the importer never reads the
// descriptor the exporter reads. The session ends with its own connection
// (when every process that holds it has closed it), and the connections
// imported into it with it.

import (
	"net"
	"os"
	"sync"
	"unsafe"

	"github.com/vrdma/vrdma/internal/proto"
	"golang.org/x/sys/unix"
)

// maxJoined is how many connections ibv_import_device may add to one
// session: each holds one of the daemon's descriptors.
const maxJoined = 16

// noReply is the reply of a command that answered elsewhere: serveConn
// sends nothing on the connection it came on.
var noReply = &struct{ noReply bool }{true}

// joinedConns are the connections imported into a session.
type joinedConns struct {
	mu    sync.Mutex
	conns map[*proto.Conn]struct{}
	ended bool // the session ended: no more are added (mu)
	wg    sync.WaitGroup
}

func (j *joinedConns) isEnded() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.ended
}

// add registers c, unless the session ended or holds maxJoined already.
func (j *joinedConns) add(c *proto.Conn) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	switch {
	case j.ended:
		return proto.Errorf(proto.CodeInvalid, "the session ended while the device was being imported")
	case len(j.conns) >= maxJoined:
		return proto.Errorf(proto.CodeLimit, "a device context is imported %d times already: close an imported context first", maxJoined)
	}
	if j.conns == nil {
		j.conns = map[*proto.Conn]struct{}{}
	}
	j.conns[c] = struct{}{}
	j.wg.Add(1)
	return nil
}

func (j *joinedConns) remove(c *proto.Conn) {
	j.mu.Lock()
	delete(j.conns, c)
	j.mu.Unlock()
	j.wg.Done()
}

// endJoined closes the imported connections and waits until none runs a
// command: the session's teardown follows.
func (s *session) endJoined() {
	j := &s.joined
	j.mu.Lock()
	j.ended = true
	for c := range j.conns {
		_ = c.Close()
	}
	j.mu.Unlock()
	j.wg.Wait()
}

// sender is who sent the device command running (mu): the request of an
// imported connection is its own sender's.
func (s *session) sender() proto.Sender {
	if s.from != nil {
		return s.from.LastSender()
	}
	return s.conn.LastSender()
}

// cmdImportDevice adds the socket that comes with the request to the
// session as another connection, if the process at its other end (the one
// that made the socketpair) is of the session's user.
func cmdImportDevice(s *session, body []byte, fds []int) (any, []int, error) {
	req, err := decode[proto.ImportDeviceReq](body)
	if err != nil {
		proto.CloseFDs(fds)
		return nil, nil, err
	}
	if len(fds) != 1 {
		proto.CloseFDs(fds)
		return nil, nil, proto.Errorf(proto.CodeInvalid, "import_device takes one descriptor, a connected unixpacket socket, not %d", len(fds))
	}
	if s.adapter == nil {
		unix.Close(fds[0])
		return nil, nil, proto.Errorf(proto.CodeInvalid, "import_device needs an opened device: this connection named none in hello")
	}
	uc, err := unixPacketConn(fds[0])
	if err != nil {
		return nil, nil, err
	}
	who := peerCreds(uc)
	// From here on the importer waits on its socket: a refusal goes there.
	rh := proto.Header{Kind: proto.KindReply, Op: proto.OpImportDevice, ID: req.ID}
	c := proto.NewConn(uc)
	refuse := func(err error) (any, []int, error) {
		rh.Code = proto.CodeOf(err)
		s.replyOn(c, rh, errBody(err))
		c.Close()
		return noReply, nil, nil
	}
	// The session's objects are its user's, charged to that user: another
	// user (tenant) imports nothing, whoever passed it the descriptor.
	if !who.known || who.uid != s.cred.uid {
		return refuse(proto.Errorf(proto.CodePermission, "the importing process (%s) is not the user whose device context this is: a context is imported only by its own user's processes", who.String()))
	}
	if err := s.d.fds.admit(1); err != nil {
		return refuse(err)
	}
	_ = proto.PassCredentials(uc)
	if err := s.joined.add(c); err != nil {
		return refuse(err)
	}
	inst := s.instance()
	info := adapterInfo(s.adapter)
	resp := proto.HelloResp{Version: proto.Version, Instance: s.shown(inst.Name), Host: s.d.cfg.HostName,
		Device: &info, Attr: deviceAttr(s.adapter, s.limits())}
	for _, a := range inst.Adapters {
		resp.Adapters = append(resp.Adapters, adapterInfo(a))
	}
	go func() {
		defer s.joined.remove(c)
		defer c.Close()
		s.replyOn(c, rh, resp)
		s.serveConn(c, true)
	}()
	return noReply, nil, nil
}

// unixPacketConn wraps fd, which must be a connected unix SOCK_SEQPACKET
// socket; it owns fd either way.
func unixPacketConn(fd int) (*net.UnixConn, error) {
	typ, err1 := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
	dom, err2 := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DOMAIN)
	if err1 != nil || err2 != nil || typ != unix.SOCK_SEQPACKET || dom != unix.AF_UNIX {
		unix.Close(fd)
		return nil, proto.Errorf(proto.CodeInvalid, "import_device's descriptor is not a unixpacket socket: pass one end of socketpair(AF_UNIX, SOCK_SEQPACKET)")
	}
	// A socketpair's ends have no name. A socket with a name at either end
	// is a connection to a listener: to this daemon (another session's
	// client end) or another program, which, served, could answer the
	// daemon's replies with replies for ever.
	if !unnamed(fd, unix.SYS_GETSOCKNAME) || !unnamed(fd, unix.SYS_GETPEERNAME) {
		unix.Close(fd)
		return nil, proto.Errorf(proto.CodeInvalid, "import_device's socket is a connection to a listening socket, not a socketpair's: pass one end of a new socketpair(AF_UNIX, SOCK_SEQPACKET)")
	}
	f := os.NewFile(uintptr(fd), "import")
	nc, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return nil, proto.Errorf(proto.CodeLimit, "the daemon cannot take the imported socket (%v): close objects or devices, or raise the daemon's RLIMIT_NOFILE", err)
	}
	uc, ok := nc.(*net.UnixConn)
	if !ok {
		nc.Close()
		return nil, proto.Errorf(proto.CodeInvalid, "import_device's descriptor is not a unixpacket socket: pass one end of socketpair(AF_UNIX, SOCK_SEQPACKET)")
	}
	return uc, nil
}

// unnamed reports whether the address getsockname or getpeername (call)
// gives for the unix socket fd is the empty one of a socketpair's end: the
// address family alone. (x/sys/unix shows it as "@", as an abstract name.)
func unnamed(fd int, call uintptr) bool {
	var sa unix.RawSockaddrAny
	n := uint32(unix.SizeofSockaddrAny)
	_, _, e := unix.Syscall(call, uintptr(fd), uintptr(unsafe.Pointer(&sa)), uintptr(unsafe.Pointer(&n)))
	return e == 0 && n == uint32(unsafe.Sizeof(sa.Addr.Family))
}

// cmdImportObject finds an object of the session by its handle for
// ibv_import_pd and ibv_import_mr: nothing is created or charged, the
// handle is the object's, whichever connection made it.
func cmdImportObject(s *session, body []byte, _ []int) (any, []int, error) {
	req, err := decode[proto.ImportObjectReq](body)
	if err != nil {
		return nil, nil, err
	}
	switch req.Kind {
	case "pd":
		if _, err := lookup(s.pds, req.Handle, "protection domain"); err != nil {
			return nil, nil, err
		}
		return proto.ImportObjectResp{Handle: req.Handle}, nil, nil
	case "mr":
		pd, err := lookup(s.pds, req.PD, "protection domain")
		if err != nil {
			return nil, nil, err
		}
		mr, err := lookup(s.mrs, req.Handle, "memory region")
		if err != nil {
			return nil, nil, err
		}
		if mr.PD() != pd {
			return nil, nil, proto.Errorf(proto.CodeInvalid, "memory region %d is not of protection domain %d: import it into its own", req.Handle, req.PD)
		}
		_, length, key, access := mr.Info()
		return proto.ImportObjectResp{Handle: req.Handle, LKey: key, RKey: key, Length: length, Access: uint32(access)}, nil, nil
	}
	return nil, nil, proto.Errorf(proto.CodeInvalid, "import_object of kind %q: the kinds are \"pd\" and \"mr\"", req.Kind)
}
