package proto

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// Sender is who sent a message, as the kernel tells the receiver of a
// socket with SO_PASSCRED (SCM_CREDENTIALS): the process (its thread group
// id, as the receiver's pid namespace sees it; 0 when it cannot see it)
// and its user and group at the time it sent. A process cannot claim
// another's pid or uid without CAP_SYS_ADMIN or CAP_SETUID.
type Sender struct {
	PID   int32
	UID   uint32
	GID   uint32
	Known bool // the message carried credentials
}

// PassCredentials has the kernel attach the sender's credentials to every
// message c receives from now on (SO_PASSCRED), and to those a client sent
// before its connection was accepted; LastSender reads them. Set on a
// listening socket, the sockets it accepts inherit it.
func PassCredentials(c syscall.Conn) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PASSCRED, 1)
	}); err != nil {
		return err
	}
	return serr
}

// LastSender returns who sent the message Recv returned last (Known false
// unless the socket passes credentials: PassCredentials).
func (c *Conn) LastSender() Sender { return c.sender }

// parseSender reads the SCM_CREDENTIALS control message of oob, if any.
func parseSender(oob []byte) Sender {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return Sender{}
	}
	for i := range msgs {
		if u, err := unix.ParseUnixCredentials(&msgs[i]); err == nil {
			return Sender{PID: u.Pid, UID: u.Uid, GID: u.Gid, Known: true}
		}
	}
	return Sender{}
}
