package safedir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Make makes dir, and the parents it lacks, with mode perm (whatever the
// umask), and returns it with symbolic links resolved, after checking
// that only the caller and root can change what it holds: dir and every
// directory above it up to / must be owned by one of them and not
// writable by group or others. A parent that others may write but whose
// sticky bit is set passes; dir itself gets no such excuse, since the
// names made in it may be predictable and another user could make them
// first. The parents are checked before anything is made in them. A
// refusal is an *Error; a failed mkdir a *MakeError.
func Make(dir string, perm fs.FileMode) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
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
			return "", err
		}
		missing = append([]string{existing}, missing...)
		existing = parent
	}
	if len(missing) > 0 {
		real, err := filepath.EvalSymlinks(existing)
		if err != nil {
			return "", err
		}
		if err := checkChain(real, false, abs); err != nil {
			return "", err
		}
		for _, p := range missing {
			if err := os.Mkdir(p, perm); err != nil {
				if errors.Is(err, fs.ErrExist) {
					continue // made meanwhile: checked below like the rest
				}
				return "", &MakeError{Dir: abs, Err: err}
			}
			if err := os.Chmod(p, perm); err != nil { // the umask took bits away
				return "", &MakeError{Dir: abs, Err: err}
			}
		}
	}
	return check(abs, true)
}

// Parent checks that dir, an existing directory to make another in, and
// every directory above it, links resolved, follow Make's rules for
// parents (a sticky dir may be writable by others), and returns dir with
// links resolved.
func Parent(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	return check(abs, false)
}

// Private checks that dir is the caller's alone: a directory, not a
// symbolic link, owned by the caller's effective uid (root's only for
// root), with no permission for group or others, in parents that follow
// Make's rules. It returns dir with the links of its parents resolved.
func Private(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	info, err := os.Lstat(abs)
	if err != nil {
		return "", err
	}
	refuse := func(why string) error {
		return &Error{Dir: abs, Path: abs, UID: Owner(info), Mode: info.Mode(), Why: why}
	}
	switch uid := Owner(info); {
	case info.Mode()&fs.ModeSymlink != 0:
		return "", refuse("is a symbolic link: it may point anywhere")
	case !info.IsDir():
		return "", refuse("is not a directory")
	case uid != uint32(os.Geteuid()):
		return "", refuse(fmt.Sprintf("belongs to another user, not you (uid %d)", os.Geteuid()))
	case info.Mode().Perm()&0o077 != 0:
		return "", refuse("is not mode 0700: others may use it")
	}
	return check(abs, true)
}

// check resolves the links of abs and checks the chain from it up to /.
func check(abs string, final bool) (string, error) {
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", err
	}
	if err := checkChain(real, final, abs); err != nil {
		return "", err
	}
	return real, nil
}

// checkChain checks dir (without symbolic links) and each directory above
// it, as Make describes; final says whether dir is the directory itself
// (no sticky-bit excuse) rather than a parent to make it in. asked is the
// directory asked for, for the *Error.
func checkChain(dir string, final bool, asked string) error {
	for p := dir; ; p = filepath.Dir(p) {
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		refuse := func(why string) error {
			return &Error{Dir: asked, Path: p, UID: Owner(info), Mode: info.Mode(), Why: why}
		}
		switch mode := info.Mode(); {
		case !info.IsDir():
			return refuse("is not a directory (it changed while vrdma checked it)")
		case !TrustedOwner(Owner(info)):
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
