package guest

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Install copies the library built in libDir (see Build) into dir, with its
// libibverbs.so link, for a system-wide install or a container image. The
// files are replaced by rename, so programs already running on an older copy
// keep it.
func Install(libDir, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("guest library: cannot install into %s: %w", dir, err)
	}
	src, err := os.Open(filepath.Join(libDir, SOName))
	if err != nil {
		return fmt.Errorf("guest library: %w (build the library first)", err)
	}
	defer src.Close()
	tmp, err := os.CreateTemp(dir, "."+SOName+".")
	if err != nil {
		return fmt.Errorf("guest library: cannot install into %s: %w", dir, err)
	}
	defer os.Remove(tmp.Name()) // gone after the rename
	_, err = io.Copy(tmp, src)
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(dir, SOName))
	}
	if err != nil {
		return fmt.Errorf("guest library: installing %s into %s: %w", SOName, dir, err)
	}
	link := filepath.Join(dir, "."+LinkName+".new")
	os.Remove(link)
	if err := os.Symlink(SOName, link); err != nil {
		return fmt.Errorf("guest library: installing %s into %s: %w", LinkName, dir, err)
	}
	if err := os.Rename(link, filepath.Join(dir, LinkName)); err != nil {
		os.Remove(link)
		return fmt.Errorf("guest library: installing %s into %s: %w", LinkName, dir, err)
	}
	return nil
}
