package guest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// ErrUnsafeDir reports a directory that a user other than the caller and
// root could change: the build cache or an install directory. Code put
// there would run in every program the library is loaded into.
var ErrUnsafeDir = errors.New("a directory another user can change")

// UnsafeDirError says which directory, on the way to Dir, another user
// could change, and how.
type UnsafeDirError struct {
	Role string      // what Dir is for: "the build cache", "the install directory"
	Dir  string      // the directory asked for
	Path string      // the directory at fault: Dir or one of its parents
	UID  uint32      // Path's owner
	Mode fs.FileMode // Path's mode
	Why  string      // what another user could do there
	Fix  string      // what to do instead
}

func (e *UnsafeDirError) Error() string {
	return fmt.Sprintf("guest library: refusing %s %s: %s (owner uid %d, mode %04o) %s: another user could put code into the libraries vrdma loads; %s",
		e.Role, e.Dir, e.Path, e.UID, unixMode(e.Mode), e.Why, e.Fix)
}

// Is makes errors.Is(err, ErrUnsafeDir) hold.
func (e *UnsafeDirError) Is(target error) bool { return target == ErrUnsafeDir }

// unixMode is m's permission bits with setuid, setgid and sticky as chmod
// numbers them.
func unixMode(m fs.FileMode) uint32 {
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

// trustedOwner reports whether uid may own what the library is built in
// or loaded from: the caller (its effective uid) or root.
func trustedOwner(uid uint32) bool {
	return uid == 0 || uid == uint32(os.Geteuid())
}

// ownerOf returns the owner of the file info describes.
func ownerOf(info fs.FileInfo) uint32 {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return st.Uid
	}
	return ^uint32(0) // unknown: trusted by nobody
}

// secureDir makes dir, and the parents it lacks, with mode perm, and
// returns it with symbolic links resolved (the path to use from then on,
// so that a link cannot be moved between the check and the use), after
// checking that only the caller and root can change what it holds: dir
// and every directory above it up to / must be owned by one of them and
// not writable by group or others. A parent that others may write but
// whose sticky bit is set (/tmp) passes, since others cannot rename or
// remove the caller's entries in it; the entry below it is checked as
// any other. The sticky bit does not excuse dir itself: the names vrdma
// makes in it are predictable, so another user could make them first.
// Parents are checked before anything is made in them. role and fix go
// into the *UnsafeDirError.
func secureDir(dir string, perm fs.FileMode, role, fix string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("guest library: %s %s: %w", role, dir, err)
	}
	var missing []string // from the existing ancestor down to abs
	existing := abs
	for {
		_, err := os.Stat(existing)
		if err == nil {
			break
		}
		parent := filepath.Dir(existing)
		if !errors.Is(err, fs.ErrNotExist) || parent == existing {
			return "", fmt.Errorf("guest library: %s %s: %w", role, abs, err)
		}
		missing = append([]string{existing}, missing...)
		existing = parent
	}
	if len(missing) > 0 {
		real, err := filepath.EvalSymlinks(existing)
		if err != nil {
			return "", fmt.Errorf("guest library: %s %s: %w", role, abs, err)
		}
		if err := checkChain(real, false, role, abs, fix); err != nil {
			return "", err
		}
		for _, p := range missing {
			if err := os.Mkdir(p, perm); err != nil {
				if errors.Is(err, fs.ErrExist) {
					continue // made meanwhile: checked below like the rest
				}
				return "", fmt.Errorf("guest library: cannot create %s %s: %w (%s)", role, abs, err, fix)
			}
			if err := os.Chmod(p, perm); err != nil { // the umask took bits away
				return "", fmt.Errorf("guest library: cannot create %s %s: %w (%s)", role, abs, err, fix)
			}
		}
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("guest library: %s %s: %w", role, abs, err)
	}
	if err := checkChain(real, true, role, abs, fix); err != nil {
		return "", err
	}
	return real, nil
}

// checkChain checks dir (without symbolic links) and each directory above
// it, as secureDir describes; final says whether dir is the directory
// itself (no sticky-bit excuse) rather than a parent to make it in.
func checkChain(dir string, final bool, role, asked, fix string) error {
	for p := dir; ; p = filepath.Dir(p) {
		info, err := os.Lstat(p)
		if err != nil {
			return fmt.Errorf("guest library: %s %s: %w", role, asked, err)
		}
		refuse := func(why string) error {
			return &UnsafeDirError{Role: role, Dir: asked, Path: p, UID: ownerOf(info), Mode: info.Mode(), Why: why, Fix: fix}
		}
		switch mode := info.Mode(); {
		case !info.IsDir():
			return refuse("is not a directory (it changed while vrdma checked it)")
		case !trustedOwner(ownerOf(info)):
			return refuse(fmt.Sprintf("belongs to neither you (uid %d) nor root", os.Geteuid()))
		case mode.Perm()&0o022 != 0 && (mode&fs.ModeSticky == 0 || final && p == dir):
			who := "others"
			if mode.Perm()&0o002 == 0 {
				who = "its group"
			}
			why := "is writable by " + who
			if mode&fs.ModeSticky != 0 {
				why += " (the sticky bit does not stop them making the names vrdma will use)"
			}
			return refuse(why)
		}
		if parent := filepath.Dir(p); parent == p {
			return nil
		}
	}
}
