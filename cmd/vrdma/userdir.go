package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/vrdma/vrdma/internal/safedir"
)

// The directory of a user's own daemon, the one vrdma run starts when no
// daemon answers at the default socket (docs/design/embedded-daemon.md).
// Whoever can connect to a daemon's socket can use its adapters, so the
// socket lives in a directory that is the user's alone: owned by the uid,
// no access for group or others, not a symbolic link, in parents that
// only the user and root can change (internal/safedir, the check the
// guest library's build cache makes too). vrdma refuses a directory that is not,
// rather than serve (or connect to) a socket someone else may have put
// there.

// userSocketName is the socket's name in the user's daemon directory.
const userSocketName = "vrdma.sock"

// runUserDir holds the runtime directories that systemd-logind makes, one
// per uid (a variable for the tests).
var runUserDir = "/run/user"

// errNotPrivate is the error of a directory that is not the user's alone.
var errNotPrivate = errors.New("not private to you")

// userDaemonDir returns the directory of the user's own daemon, made if
// it does not exist: $XDG_RUNTIME_DIR/vrdma, /run/user/UID/vrdma (the
// runtime directory that systemd-logind makes) or, with neither, a
// directory vrdma-UID in os.TempDir(). The runtime directory must be the
// user's own 0700 directory, the temporary one may be others' only if it
// is sticky, and every directory above either must be the user's or
// root's and not writable by others unless sticky (safedir). The path
// returned has its links resolved.
func userDaemonDir() (string, error) {
	uid := os.Geteuid()
	if base := os.Getenv("XDG_RUNTIME_DIR"); base != "" {
		real, err := checkPrivate(base)
		if err != nil {
			return "", fmt.Errorf("XDG_RUNTIME_DIR: %w", err)
		}
		return privateDir(filepath.Join(real, "vrdma"))
	}
	base := filepath.Join(runUserDir, strconv.Itoa(uid))
	if fi, err := os.Lstat(base); err == nil && fi.IsDir() {
		real, err := checkPrivate(base)
		if err != nil {
			return "", err
		}
		return privateDir(filepath.Join(real, "vrdma"))
	}
	tmp, err := safedir.Parent(os.TempDir())
	if err != nil {
		return "", notPrivate(os.TempDir(), err, "a directory of yours there could be replaced by another user (set XDG_RUNTIME_DIR or TMPDIR to a directory of yours with mode 0700)")
	}
	return privateDir(filepath.Join(tmp, "vrdma-"+strconv.Itoa(uid)))
}

// privateDir makes dir with mode 0700 if it does not exist, and checks
// that it is the user's alone.
func privateDir(dir string) (string, error) {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("cannot make the directory of your own vrdma daemon: %w (set XDG_RUNTIME_DIR to a directory of yours with mode 0700)", err)
	}
	return checkPrivate(dir)
}

// checkPrivate returns dir with its parents' links resolved, or an error
// wrapping errNotPrivate, saying why and what to do, unless dir is a
// directory (not a link to one) owned by the user that its group and
// others cannot use, in parents that only the user and root can change
// (safedir.Private).
func checkPrivate(dir string) (string, error) {
	real, err := safedir.Private(dir)
	if err != nil {
		return "", notPrivate(dir, err, "a daemon's socket there could be someone else's (remove it, or set XDG_RUNTIME_DIR to a directory of yours with mode 0700, or start a daemon and name its socket with --socket or VRDMA_SOCKET)")
	}
	return real, nil
}

// notPrivate is the error of dir, refused by safedir with err: it wraps
// errNotPrivate (and err, if a *safedir.Error) and ends with what, the
// risk and what to do.
func notPrivate(dir string, err error, what string) error {
	var ue *safedir.Error
	if !errors.As(err, &ue) {
		return err
	}
	return fmt.Errorf("%s is %w: %w, and %s", dir, errNotPrivate, err, what)
}
