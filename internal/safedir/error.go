package safedir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// ErrUnsafe reports a directory that a user other than the caller and
// root could change.
var ErrUnsafe = errors.New("a directory another user can change")

// Error says which directory, on the way to Dir, another user could
// change, and how.
type Error struct {
	Dir  string      // the directory asked for
	Path string      // the directory at fault: Dir or one of its parents
	UID  uint32      // Path's owner
	Mode fs.FileMode // Path's mode
	Why  string      // what is wrong with Path
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s (owner uid %d, mode %04o) %s", e.Path, e.UID, UnixMode(e.Mode), e.Why)
}

// Is makes errors.Is(err, ErrUnsafe) hold.
func (e *Error) Is(target error) bool { return target == ErrUnsafe }

// MakeError is the error of a directory Make could not make (or give
// its mode).
type MakeError struct {
	Dir string // the directory asked for
	Err error  // why
}

func (e *MakeError) Error() string { return "cannot create " + e.Dir + ": " + e.Err.Error() }

// Unwrap returns the error of the failed mkdir or chmod.
func (e *MakeError) Unwrap() error { return e.Err }

// UnixMode is m's permission bits with setuid, setgid and sticky as chmod
// numbers them.
func UnixMode(m fs.FileMode) uint32 {
	u := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		u |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		u |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		u |= 0o1000
	}
	return u
}

// TrustedOwner reports whether uid may own a directory on the way to a
// safe one: the caller (its effective uid) or root.
func TrustedOwner(uid uint32) bool {
	return uid == 0 || uid == uint32(os.Geteuid())
}

// Owner returns the owner of the file info describes, or a uid no one
// trusts if it cannot tell.
func Owner(info fs.FileInfo) uint32 {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return st.Uid
	}
	return ^uint32(0)
}
