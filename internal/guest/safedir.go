package guest

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/vrdma/vrdma/internal/safedir"
)

// ErrUnsafeDir reports a directory that a user other than the caller and
// root could change: the build cache or an install directory. Code put
// there would run in every program the library is loaded into. It is
// safedir.ErrUnsafe.
var ErrUnsafeDir = safedir.ErrUnsafe

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
		e.Role, e.Dir, e.Path, e.UID, safedir.UnixMode(e.Mode), e.Why, e.Fix)
}

// Is makes errors.Is(err, ErrUnsafeDir) hold.
func (e *UnsafeDirError) Is(target error) bool { return target == ErrUnsafeDir }

// secureDir makes dir, and the parents it lacks, with mode perm, and
// returns it with symbolic links resolved, after the checks of
// safedir.Make: dir and every directory above it owned by the caller or
// root and not writable by group or others, a sticky parent excepted.
// role and fix go into the *UnsafeDirError.
func secureDir(dir string, perm fs.FileMode, role, fix string) (string, error) {
	real, err := safedir.Make(dir, perm)
	if err == nil {
		return real, nil
	}
	abs, aerr := filepath.Abs(dir)
	if aerr != nil {
		abs = dir
	}
	var ue *safedir.Error
	var me *safedir.MakeError
	switch {
	case errors.As(err, &ue):
		return "", &UnsafeDirError{Role: role, Dir: ue.Dir, Path: ue.Path, UID: ue.UID, Mode: ue.Mode, Why: ue.Why, Fix: fix}
	case errors.As(err, &me):
		return "", fmt.Errorf("guest library: cannot create %s %s: %w (%s)", role, abs, me.Err, fix)
	}
	return "", fmt.Errorf("guest library: %s %s: %w", role, abs, err)
}
