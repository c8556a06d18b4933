package guest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// installFix is what an *UnsafeDirError for an install directory says to do.
const installFix = "install into a directory only you or root can write (e.g. one root made with mode 0755), or make it so"

// Install copies the libraries built in libDir (see Build) into dir, each
// with its development link: libibverbs.so.1, and librdmacm.so.1 when the
// build made it. dir and the directories above it must pass the checks
// the build cache does (an *UnsafeDirError otherwise); those Install makes
// are mode 0755. libDir is checked as Build checks it (an
// *AlteredBuildError otherwise), and each copy is compared with the
// SHA-256 the build recorded before it replaces anything. The files are
// replaced by rename, so programs already running on an older copy keep
// it.
func Install(libDir, dir string) error {
	m, err := verifyBuild(libDir)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w (build the library first)", err)
	}
	if err != nil {
		return err
	}
	if dir, err = secureDir(dir, 0o755, "the install directory", installFix); err != nil {
		return err
	}
	if err := install(libDir, dir, SOName, LinkName, m); err != nil {
		return err
	}
	if _, ok := m[RDMACMSOName]; !ok {
		return nil // a build of sources without librdmacm
	}
	return install(libDir, dir, RDMACMSOName, RDMACMLinkName, m)
}

// install copies soname from libDir into dir, checking the copy against
// m, and links linkName to it.
func install(libDir, dir, soname, linkName string, m manifest) error {
	want, ok := m[soname]
	if !ok || want.kind != 'f' {
		return &AlteredBuildError{Dir: libDir, Path: soname, Why: "is not recorded as a file"}
	}
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
	h := sha256.New()
	_, err = io.Copy(io.MultiWriter(tmp, h), src)
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if sum := hex.EncodeToString(h.Sum(nil)); err == nil && sum != want.value {
		return &AlteredBuildError{Dir: libDir, Path: soname, Why: fmt.Sprintf("had SHA-256 %s while it was copied, not the %s recorded", sum, want.value)}
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
