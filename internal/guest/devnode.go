package guest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// DeviceNode is the node programs find for every vrdma device: the guest
// library gives each device the dev_name "vrdma", and UCX (among others)
// keeps an ibv device only if /dev/infiniband/<dev_name> is a character
// device it may read and write (docs/design/device-discovery.md).
const DeviceNode = "/dev/infiniband/vrdma"

// The node is /dev/null's character device, 1:3 (mem/null, a fixed number
// in the kernel's devices.txt, never allocated to another driver): opening
// it is harmless, and nothing opens it but a stat or access check.
const (
	deviceNodeMajor = 1
	deviceNodeMinor = 3
	deviceNodeMode  = 0o666 // as /dev/null's: it grants nothing; the daemon's socket does
)

// ErrDeviceNodeTaken is returned by EnsureDeviceNode when something else is
// at the node's path.
var ErrDeviceNodeTaken = errors.New("the path of vrdma's device node holds something else")

// ErrDeviceNodeDirUnsafe is returned by EnsureDeviceNode when the node's
// directory is not root's alone: a link, another user's, or writable by
// group or others. Root makes the node and then sets its mode by path;
// whoever may write the directory could put a link to a file of root's
// there in between, and root would make that file 0666.
var ErrDeviceNodeDirUnsafe = errors.New("the directory of vrdma's device node is not root's alone")

// EnsureDeviceNode makes DeviceNode (and /dev/infiniband) when it is
// missing; it needs root (CAP_MKNOD). A node that is already there, right,
// is left alone; anything else at the path is ErrDeviceNodeTaken, untouched;
// a directory that is not root's alone is ErrDeviceNodeDirUnsafe, and
// nothing is made or changed in it.
func EnsureDeviceNode() error { return ensureDeviceNode(DeviceNode) }

// ensureDeviceNode is EnsureDeviceNode at path.
func ensureDeviceNode(path string) error {
	dir := filepath.Dir(path)
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("device node: %w", err)
		}
	}
	if err := deviceNodeDirOK(dir); err != nil {
		return err
	}
	ok, err := deviceNodeOK(path)
	if ok || !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	err = unix.Mknod(path, unix.S_IFCHR|deviceNodeMode, int(unix.Mkdev(deviceNodeMajor, deviceNodeMinor)))
	if errors.Is(err, fs.ErrExist) { // another daemon or install made it meanwhile
		_, err = deviceNodeOK(path)
		return err
	}
	if err != nil {
		return fmt.Errorf("device node: cannot make %s (%w): it needs the host's root (CAP_MKNOD; root in a user namespace or a container cannot); run the daemon as root, or once `sudo vrdma guest build --out DIR`, or `sudo mknod -m 666 %s c %d %d`",
			path, err, path, deviceNodeMajor, deviceNodeMinor)
	}
	if err := os.Chmod(path, deviceNodeMode); err != nil { // past the umask
		return fmt.Errorf("device node: %w", err)
	}
	return nil
}

// deviceNodeDirOK checks that dir is a directory (not a link) of root's
// that neither its group nor others may write.
func deviceNodeDirOK(dir string) error {
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return fmt.Errorf("device node: %w", err)
	}
	why := ""
	switch {
	case st.Mode&unix.S_IFMT == unix.S_IFLNK:
		why = "is a symbolic link"
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		why = "is not a directory"
	case st.Uid != 0:
		why = fmt.Sprintf("belongs to uid %d, not root", st.Uid)
	case st.Mode&0o022 != 0:
		why = fmt.Sprintf("has mode %o: its group or others may write it", st.Mode&0o7777)
	default:
		return nil
	}
	return fmt.Errorf("%w: %s %s; make it a directory of root's that only root writes (chown root:root %s; chmod 755 %s), and vrdma's daemon makes its node there",
		ErrDeviceNodeDirUnsafe, dir, why, dir, dir)
}

// deviceNodeOK reports whether path is the node vrdma makes; an error
// wrapping fs.ErrNotExist when nothing is there.
func deviceNodeOK(path string) (bool, error) {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return false, fmt.Errorf("device node %s: %w", path, fs.ErrNotExist)
		}
		return false, fmt.Errorf("device node %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFCHR || unix.Major(st.Rdev) != deviceNodeMajor || unix.Minor(st.Rdev) != deviceNodeMinor {
		return false, fmt.Errorf("%w: %s is not the character device %d:%d; move it away, and vrdma's daemon makes its node there",
			ErrDeviceNodeTaken, path, deviceNodeMajor, deviceNodeMinor)
	}
	if st.Mode&0o777 != deviceNodeMode {
		if err := os.Chmod(path, deviceNodeMode); err != nil {
			return false, fmt.Errorf("device node %s has mode %o, not %o: %w", path, st.Mode&0o777, deviceNodeMode, err)
		}
	}
	return true, nil
}

// DeviceNodeMissing reports, for a daemon that cannot make the node (not
// root), whether programs such as UCX will miss it.
func DeviceNodeMissing() bool {
	_, err := deviceNodeOK(DeviceNode)
	return errors.Is(err, fs.ErrNotExist)
}
