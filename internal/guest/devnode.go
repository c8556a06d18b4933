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

// EnsureDeviceNode makes DeviceNode (and /dev/infiniband) when it is
// missing; it needs root (CAP_MKNOD). A node that is already there, right,
// is left alone; anything else at the path is ErrDeviceNodeTaken, untouched.
func EnsureDeviceNode() error { return ensureDeviceNode(DeviceNode) }

// ensureDeviceNode is EnsureDeviceNode at path.
func ensureDeviceNode(path string) error {
	ok, err := deviceNodeOK(path)
	if ok || !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("device node: %w", err)
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
