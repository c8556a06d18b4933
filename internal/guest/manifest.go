package guest

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/vrdma/vrdma/internal/safedir"
)

// ManifestName is the file in a build's directory that records what the
// build left there: every file's SHA-256, every link's target, every
// directory. A build is loaded or installed only while it matches.
const ManifestName = "manifest.sha256"

// manifestHeader opens a manifest; it changes with the format.
const manifestHeader = "vrdma guest manifest 1"

// maxManifest bounds the manifest vrdma reads (the real one is a few KiB).
const maxManifest = 1 << 20

// ErrAlteredBuild reports a build directory that is not as vrdma left it.
var ErrAlteredBuild = errors.New("the guest library's build is not as vrdma left it")

// AlteredBuildError says what in a build directory differs from what the
// build recorded, or is writable or owned by another user.
type AlteredBuildError struct {
	Dir  string // the build directory
	Path string // what differs, relative to Dir ("" for Dir itself)
	Why  string // how
}

func (e *AlteredBuildError) Error() string {
	what := e.Dir
	if e.Path != "" {
		what = filepath.Join(e.Dir, e.Path)
	}
	return fmt.Sprintf("guest library: refusing the build in %s: %s %s, which is not how the build left it (its %s): "+
		"something other than vrdma wrote there, so vrdma neither loads nor installs it; "+
		"look at what changed, then remove it (rm -r %s) and run again to build it anew",
		e.Dir, what, e.Why, ManifestName, e.Dir)
}

// Is makes errors.Is(err, ErrAlteredBuild) hold.
func (e *AlteredBuildError) Is(target error) bool { return target == ErrAlteredBuild }

// entry is one line of a manifest: kind 'f' (a regular file, value its
// SHA-256 in hex), 'l' (a symbolic link, value its target) or 'd' (a
// directory, value "-").
type entry struct {
	kind  byte
	value string
}

// manifest maps slash-separated paths under a build directory to entries.
type manifest map[string]entry

// seal takes group and other write permission away from everything under
// dir (the compiler honours the umask, which may grant them) and writes
// its manifest.
func seal(dir string) error {
	m := manifest{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		if strings.ContainsAny(rel, "\n\r") {
			return fmt.Errorf("%q: a name a manifest cannot hold", rel)
		}
		switch t := d.Type(); {
		case t.IsDir():
			m[rel] = entry{'d', "-"}
			return os.Chmod(p, 0o755)
		case t&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if strings.ContainsAny(target, "\n\r") {
				return fmt.Errorf("%s -> %q: a target a manifest cannot hold", rel, target)
			}
			m[rel] = entry{'l', target}
		case t.IsRegular():
			info, err := d.Info()
			if err != nil {
				return err
			}
			if err := os.Chmod(p, info.Mode().Perm()&^0o022); err != nil {
				return err
			}
			sum, err := fileSum(p)
			if err != nil {
				return err
			}
			m[rel] = entry{'f', sum}
		default:
			return fmt.Errorf("%s: neither a file, a link nor a directory", rel)
		}
		return nil
	})
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, ManifestName), m.encode(), 0o644)
	}
	if err == nil {
		err = os.Chmod(filepath.Join(dir, ManifestName), 0o644)
	}
	if err != nil {
		return fmt.Errorf("guest library: recording the build in %s: %w", dir, err)
	}
	return nil
}

// fileSum returns the SHA-256 of the file at p, in hex.
func fileSum(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// encode writes m as text: the header, then "KIND VALUE PATH" lines
// sorted by path.
func (m manifest) encode() []byte {
	paths := make([]string, 0, len(m))
	for p := range m {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var b bytes.Buffer
	b.WriteString(manifestHeader + "\n")
	for _, p := range paths {
		e := m[p]
		fmt.Fprintf(&b, "%c %s %s\n", e.kind, e.value, p)
	}
	return b.Bytes()
}

// parseManifest reads what encode wrote.
func parseManifest(data []byte) (manifest, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, maxManifest)
	if !sc.Scan() || sc.Text() != manifestHeader {
		return nil, fmt.Errorf("does not start with %q", manifestHeader)
	}
	m := manifest{}
	for n := 2; sc.Scan(); n++ {
		line := sc.Text()
		kind, rest, ok1 := strings.Cut(line, " ")
		value, p, ok2 := strings.Cut(rest, " ")
		switch {
		case !ok1 || !ok2 || len(kind) != 1 || value == "" || p == "":
			return nil, fmt.Errorf("line %d: %q is not KIND VALUE PATH", n, line)
		case kind[0] == 'f' && (len(value) != 2*sha256.Size || !isHex(value)):
			return nil, fmt.Errorf("line %d: %q is not a SHA-256", n, value)
		case kind[0] != 'f' && kind[0] != 'l' && kind[0] != 'd':
			return nil, fmt.Errorf("line %d: unknown kind %q", n, kind)
		case p == ManifestName || !fs.ValidPath(p) || p == ".":
			return nil, fmt.Errorf("line %d: %q is not a path in the build", n, p)
		}
		if _, dup := m[p]; dup {
			return nil, fmt.Errorf("line %d: %s listed twice", n, p)
		}
		m[p] = entry{kind[0], value}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return m, nil
}

// isHex reports whether s is lower-case hexadecimal.
func isHex(s string) bool {
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// verifyBuild checks the build in dir before it is loaded or installed:
// dir and everything in it must be owned by the caller or root and not
// writable by group or others, and it must hold exactly what its manifest
// records, each file with its SHA-256. It returns the manifest, an error
// wrapping fs.ErrNotExist when there is no dir at all, or an
// *AlteredBuildError.
func verifyBuild(dir string) (manifest, error) {
	altered := func(p, why string) error { return &AlteredBuildError{Dir: dir, Path: p, Why: why} }
	info, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("guest library: %w", err)
	}
	if err != nil {
		return nil, altered("", err.Error())
	}
	if err := checkOwned(info); err != "" {
		return nil, altered("", err)
	}
	if !info.IsDir() {
		return nil, altered("", "is not a directory")
	}
	mf := filepath.Join(dir, ManifestName)
	info, err = os.Lstat(mf)
	if err != nil {
		return nil, altered(ManifestName, "cannot be read ("+err.Error()+")")
	}
	if why := checkOwned(info); why != "" {
		return nil, altered(ManifestName, why)
	}
	if !info.Mode().IsRegular() || info.Size() > maxManifest {
		return nil, altered(ManifestName, "is not a regular file of at most 1 MiB")
	}
	data, err := os.ReadFile(mf)
	if err != nil {
		return nil, altered(ManifestName, "cannot be read ("+err.Error()+")")
	}
	m, err := parseManifest(data)
	if err != nil {
		return nil, altered(ManifestName, "is damaged: "+err.Error())
	}
	seen := map[string]bool{}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return altered("", "cannot be read ("+err.Error()+")")
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if rel == "." || rel == ManifestName {
			return nil
		}
		want, ok := m[rel]
		if !ok {
			return altered(rel, "is there but not recorded")
		}
		seen[rel] = true
		info, err := d.Info()
		if err != nil {
			return altered(rel, "cannot be read ("+err.Error()+")")
		}
		if why := checkOwned(info); why != "" {
			return altered(rel, why)
		}
		switch t := d.Type(); {
		case t.IsDir():
			if want.kind != 'd' {
				return altered(rel, "is a directory")
			}
		case t&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			switch {
			case err != nil:
				return altered(rel, "cannot be read ("+err.Error()+")")
			case want.kind != 'l' || target != want.value:
				return altered(rel, fmt.Sprintf("is a link to %q", target))
			}
		case t.IsRegular():
			sum, err := fileSum(p)
			switch {
			case err != nil:
				return altered(rel, "cannot be read ("+err.Error()+")")
			case want.kind != 'f':
				return altered(rel, "is a file")
			case sum != want.value:
				return altered(rel, fmt.Sprintf("has SHA-256 %s, not the %s recorded", sum, want.value))
			}
		default:
			return altered(rel, "is neither a file, a link nor a directory")
		}
		return nil
	})
	if err != nil {
		var ae *AlteredBuildError
		if errors.As(err, &ae) {
			return nil, err
		}
		return nil, altered("", err.Error())
	}
	for p := range m {
		if !seen[p] {
			return nil, altered(p, "is missing")
		}
	}
	return m, nil
}

// checkOwned says what is wrong with info's owner and mode ("" if
// nothing): it must belong to the caller or root and, unless a link, not
// be writable by group or others.
func checkOwned(info fs.FileInfo) string {
	if uid := safedir.Owner(info); !safedir.TrustedOwner(uid) {
		return fmt.Sprintf("belongs to uid %d, neither you (uid %d) nor root", uid, os.Geteuid())
	}
	if info.Mode()&fs.ModeSymlink == 0 && info.Mode().Perm()&0o022 != 0 {
		return fmt.Sprintf("is writable by group or others (mode %04o)", safedir.UnixMode(info.Mode()))
	}
	return ""
}
