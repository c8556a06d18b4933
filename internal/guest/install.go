package guest

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Install copies the libraries built in libDir (see Build) into dir, each
// with its development link: libibverbs.so.1, and librdmacm.so.1 when the
// build made it. The files are replaced by rename, so programs already
// running on an older copy keep it.
func Install(libDir, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("guest library: cannot install into %s: %w", dir, err)
	}
	if err := install(libDir, dir, SOName, LinkName); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(libDir, RDMACMSOName)); errors.Is(err, fs.ErrNotExist) {
		return nil // a build of sources without librdmacm
	}
	return install(libDir, dir, RDMACMSOName, RDMACMLinkName)
}

// install copies soname from libDir into dir and links linkName to it.
func install(libDir, dir, soname, linkName string) error {
	src, err := os.Open(filepath.Join(libDir, soname))
	if err != nil {
		return fmt.Errorf("guest library: %w (build the library first)", err)
	}
	defer src.Close()
	tmp, err := os.CreateTemp(dir, "."+soname+".")
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
		err = os.Rename(tmp.Name(), filepath.Join(dir, soname))
	}
	if err != nil {
		return fmt.Errorf("guest library: installing %s into %s: %w", soname, dir, err)
	}
	link := filepath.Join(dir, "."+linkName+".new")
	os.Remove(link)
	if err := os.Symlink(soname, link); err != nil {
		return fmt.Errorf("guest library: installing %s into %s: %w", linkName, dir, err)
	}
	if err := os.Rename(link, filepath.Join(dir, linkName)); err != nil {
		os.Remove(link)
		return fmt.Errorf("guest library: installing %s into %s: %w", linkName, dir, err)
	}
	return nil
}
