package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// The directory of a user's own daemon, the one vrdma run starts when no
// daemon answers at the default socket (docs/design/embedded-daemon.md).
// Whoever can connect to a daemon's socket can use its adapters, so the
// socket lives in a directory that is the user's alone: owned by the uid,
// no access for group or others, not a symbolic link, in a parent that
// others cannot rename it out of. vrdma refuses a directory that is not,
// rather than serve (or connect to) a socket someone else may have put
// there.

// userSocketName is the socket's name in the user's daemon directory.
const userSocketName = "vrdma.sock"

// errNotPrivate is the error of a directory that is not the user's alone.
var errNotPrivate = errors.New("not private to you")

// userDaemonDir returns the directory of the user's own daemon, made if
// it does not exist: $XDG_RUNTIME_DIR/vrdma, /run/user/UID/vrdma (the
// runtime directory that systemd-logind makes) or, with neither, a
// directory vrdma-UID in os.TempDir().
func userDaemonDir() (string, error) {
	uid := os.Geteuid()
	if base := os.Getenv("XDG_RUNTIME_DIR"); base != "" {
		if err := checkPrivate(base, uid); err != nil {
			return "", fmt.Errorf("XDG_RUNTIME_DIR: %w", err)
		}
		return privateDir(filepath.Join(base, "vrdma"), uid)
	}
	base := filepath.Join("/run/user", strconv.Itoa(uid))
	if fi, err := os.Lstat(base); err == nil && fi.IsDir() {
		if err := checkPrivate(base, uid); err != nil {
			return "", err
		}
		return privateDir(filepath.Join(base, "vrdma"), uid)
	}
	tmp := os.TempDir()
	if err := checkParent(tmp); err != nil {
		return "", err
	}
	return privateDir(filepath.Join(tmp, "vrdma-"+strconv.Itoa(uid)), uid)
}

// privateDir makes dir with mode 0700 if it does not exist, and checks
// that it is uid's alone.
func privateDir(dir string, uid int) (string, error) {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("cannot make the directory of your own vrdma daemon: %w (set XDG_RUNTIME_DIR to a directory of yours with mode 0700)", err)
	}
	if err := checkPrivate(dir, uid); err != nil {
		return "", err
	}
	return dir, nil
}

// checkPrivate returns an error wrapping errNotPrivate, saying why and
// what to do, unless dir is a directory (not a link to one) owned by uid
// that its group and others cannot use.
func checkPrivate(dir string, uid int) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	var why string
	switch {
	case fi.Mode()&os.ModeSymlink != 0:
		why = "it is a symbolic link"
	case !fi.IsDir():
		why = "it is not a directory"
	case !ok || int(st.Uid) != uid:
		why = "it belongs to another user"
	case fi.Mode().Perm()&0o077 != 0:
		why = fmt.Sprintf("its mode is %#o: others may use it", fi.Mode().Perm())
	default:
		return nil
	}
	return fmt.Errorf("%s is %w: %s, and a daemon's socket there could be someone else's (remove it, or set XDG_RUNTIME_DIR to a directory of yours with mode 0700, or start a daemon and name its socket with --socket or VRDMA_SOCKET)",
		dir, errNotPrivate, why)
}

// checkParent refuses a parent directory that others may write unless it
// is sticky (as /tmp is): they could rename the user's directory away and
// put their own in its place.
func checkParent(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if fi.Mode().Perm()&0o022 != 0 && fi.Mode()&os.ModeSticky == 0 {
		return fmt.Errorf("%s is %w: others may write it and it is not sticky, so a directory of yours there could be replaced (set XDG_RUNTIME_DIR or TMPDIR to a directory of yours with mode 0700)", dir, errNotPrivate)
	}
	return nil
}
