// Package safedir checks that a directory is one that no user but the
// caller and root can change: the directory and every directory above it
// up to / owned by the caller or root and not writable by group or
// others, except that a parent others may write passes when its sticky
// bit is set (/tmp), since they cannot rename or remove the caller's
// entries in it. The rules are written here once, for the guest
// library's build cache and install directory (internal/guest,
// docs/design/guest-cache.md) and for the directory of a user's own
// daemon socket (cmd/vrdma, docs/design/embedded-daemon.md).
//
// Each check resolves symbolic links and returns the resolved path, the
// one to use from then on: a link cannot be re-pointed between the check
// and the use. A refusal is an *Error, which errors.Is matches to
// ErrUnsafe.
//
//	dir, err := safedir.Make(dir, 0o700)   // make what is missing, check the chain
//	dir, err := safedir.Private(dir)       // the caller's own 0700 directory, not a link
//	tmp, err := safedir.Parent(os.TempDir()) // a directory to make one in
package safedir
