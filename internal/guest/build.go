package guest

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// Names of what a build leaves in its directory.
const (
	// SOName is the library's soname: the name programs load it by.
	SOName = "libibverbs.so.1"
	// LinkName is the development name, a symbolic link to SOName.
	LinkName = "libibverbs.so"
	// VersionScript is the sources' linker version script; the build uses
	// it when the sources have one.
	VersionScript = "libibverbs.map"

	// RDMACMSOName is the drop-in librdmacm's soname, built beside
	// libibverbs from the sources under RDMACMDir.
	RDMACMSOName = "librdmacm.so.1"
	// RDMACMLinkName is its development name, a symbolic link to RDMACMSOName.
	RDMACMLinkName = "librdmacm.so"
	// RDMACMDir is the directory of librdmacm's sources in the embedded
	// sources; it also compiles rdmacmShared from the top.
	RDMACMDir = "rdmacm"
	// RDMACMVersionScript is librdmacm's linker version script.
	RDMACMVersionScript = RDMACMDir + "/librdmacm.map"
)

// rdmacmShared are the top-level sources librdmacm compiles in as well
// (hidden in each library): the JSON reader and the log.
var rdmacmShared = []string{"json.c", "log.c"}

// Debian packages that provide what a build needs.
const (
	compilerPackage = "gcc"
	headersPackage  = "libibverbs-dev"
	rdmacmPackage   = "librdmacm-dev"
)

// rdmacmHeader is the rdma_cm header librdmacm's sources need.
const rdmacmHeader = "rdma/rdma_cma.h"

// headersFile is where Debian's libibverbs-dev puts the verbs header; it is
// looked at only when there is no compiler to ask.
const headersFile = "/usr/include/infiniband/verbs.h"

// cflags are the compiler's flags, before the soname, the output and the
// sources. They are part of the cache key: changing them rebuilds. There
// is no -Werror: on a user's machine a newer compiler's new warning must
// not stop every program; the project's own tests add it (see
// builder.extraFlags), so that a warning still fails them.
var cflags = []string{
	"-std=c11", "-D_GNU_SOURCE", "-O2", "-g", "-fPIC",
	"-Wall", "-Wextra", "-fvisibility=hidden",
	"-shared", "-Wl,-z,defs",
}

// libs are the libraries the library links against, after the sources.
var libs = []string{"-lpthread"}

// keyVersion changes when the layout of a build directory or the way it is
// built changes, so that older builds are not reused.
const keyVersion = "vrdma guest build 3"

// Build returns the directory holding libibverbs.so.1 and librdmacm.so.1
// (and their libibverbs.so and librdmacm.so links) built from the embedded
// sources, building them on first use.
//
// The directory is cacheDir/guest-HASH, where HASH covers the sources (every
// embedded file's name and contents), the compiler (`cc --version`) and the
// flags, so a change to any of them builds anew into another directory and
// an unchanged build is reused without running the compiler. The sources are
// kept in the directory's src/ (the debug information points there). The
// compiler's warnings, if any, go to stderr; they do not fail the build.
//
// The cache is the caller's alone: cacheDir and every directory above it
// must be owned by the caller or root and not writable by others (see
// secureDir), or Build fails with an *UnsafeDirError (ErrUnsafeDir); a
// cacheDir it makes is mode 0700. A build is made in a private temporary
// directory, sealed with a manifest of its files' SHA-256 (ManifestName)
// and renamed into place, so processes that build at the same time all end
// up with one complete directory. A build found in the cache is used only
// while it matches its manifest and nobody else can write it, else Build
// fails with an *AlteredBuildError (ErrAlteredBuild) that says to remove
// it: it is not rebuilt silently, since something other than vrdma wrote
// there.
//
// Build fails with a *MissingToolsError when the compiler or rdma-core's
// headers (libibverbs-dev, librdmacm-dev) are not installed and with a *CompileError, holding the compiler's
// output, when the compiler fails. DefaultCacheDir is the usual cacheDir.
func Build(cacheDir string) (libDir string, err error) {
	return builder{src: Sources(), cc: "cc", header: "infiniband/verbs.h", warnings: os.Stderr}.build(cacheDir)
}

// builder builds the library from src with the compiler cc.
type builder struct {
	src fs.FS
	cc  string // the compiler, found in $PATH
	// header is a system header the sources need, checked with the
	// compiler before a build; "" checks none.
	header string
	// extraFlags follow cflags (and are part of the cache key): the
	// project's tests add -Werror.
	extraFlags []string
	// warnings, if not nil, is shown what the compiler printed when it
	// succeeded.
	warnings io.Writer
}

// cacheFix is what an *UnsafeDirError for the build cache says to do.
const cacheFix = "use a directory only you can write, mode 0700: set " + CacheEnv + " to one, or unset it for ~/.cache/vrdma"

// build is Build on b's sources and compiler.
func (b builder) build(cacheDir string) (string, error) {
	files, err := sourceFiles(b.src)
	if err != nil {
		return "", err
	}
	var cfiles, cmfiles []string
	hasScript, hasCMScript := false, false
	for _, f := range files {
		switch {
		case f == VersionScript:
			hasScript = true
		case f == RDMACMVersionScript:
			hasCMScript = true
		case !strings.Contains(f, "/") && strings.HasSuffix(f, ".c"):
			cfiles = append(cfiles, f)
		case path.Dir(f) == RDMACMDir && strings.HasSuffix(f, ".c"):
			cmfiles = append(cmfiles, f)
		}
	}
	if len(cfiles) == 0 {
		return "", fmt.Errorf("guest library: no C sources to build: the embedded csrc/ holds no .c file (it holds %q)", files)
	}
	cc, err := exec.LookPath(b.cc)
	if err != nil {
		return "", missingCompiler(b.cc, err)
	}
	version, err := command(cc, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("guest library: %s --version failed (%v): check that the C compiler works, or reinstall it with `apt-get install --reinstall %s`", cc, err, compilerPackage)
	}
	flags := append(append([]string(nil), cflags...), b.extraFlags...)
	key, err := cacheKey(b.src, files, version, flags)
	if err != nil {
		return "", err
	}
	// Absolute, without links, and checked: the directory goes into
	// LD_LIBRARY_PATH.
	if cacheDir, err = secureDir(cacheDir, 0o700, "the build cache", cacheFix); err != nil {
		return "", err
	}
	final := filepath.Join(cacheDir, "guest-"+key)
	if _, err := verifyBuild(final); !errors.Is(err, fs.ErrNotExist) {
		if err != nil {
			return "", err
		}
		return final, nil
	}
	if b.header != "" {
		if err := checkHeader(cc, b.header, headersPackage); err != nil {
			return "", err
		}
		if len(cmfiles) > 0 {
			if err := checkHeader(cc, rdmacmHeader, rdmacmPackage); err != nil {
				return "", err
			}
		}
	}
	tmp, err := os.MkdirTemp(cacheDir, ".build-") // 0700 until sealed
	if err != nil {
		return "", fmt.Errorf("guest library: cannot build in the cache: %w (set %s to a writable directory)", err, CacheEnv)
	}
	defer os.RemoveAll(tmp) // gone after the rename; left over when the build failed
	if err := writeSources(b.src, files, filepath.Join(tmp, "src")); err != nil {
		return "", err
	}
	script := ""
	if hasScript {
		script = VersionScript
	}
	if err := b.compile(cc, flags, tmp, final, SOName, script, cfiles, libs); err != nil {
		return "", err
	}
	if err := os.Symlink(SOName, filepath.Join(tmp, LinkName)); err != nil {
		return "", fmt.Errorf("guest library: %w", err)
	}
	if len(cmfiles) > 0 {
		// librdmacm links against the libibverbs just built (its verbs and
		// its private interface), found through the link made above.
		script = ""
		if hasCMScript {
			script = RDMACMVersionScript
		}
		srcs := append(cmfiles, rdmacmShared...)
		if err := b.compile(cc, flags, tmp, final, RDMACMSOName, script, srcs, append([]string{"-Isrc", "-L.", "-libverbs"}, libs...)); err != nil {
			return "", err
		}
		if err := os.Symlink(RDMACMSOName, filepath.Join(tmp, RDMACMLinkName)); err != nil {
			return "", fmt.Errorf("guest library: %w", err)
		}
	}
	if err := seal(tmp); err != nil {
		return "", err
	}
	if err := os.Chmod(tmp, 0o755); err != nil { // MkdirTemp makes it 0700
		return "", fmt.Errorf("guest library: %w", err)
	}
	if err := publish(tmp, final); err != nil {
		return "", err
	}
	// Ours or, when another build landed first, the winner's: checked alike.
	if _, err := verifyBuild(final); err != nil {
		return "", err
	}
	return final, nil
}

// compile builds the shared library soname in dir from srcs (paths under
// dir's src/) with flags and the version script (under src/; "" for
// none), then the extra arguments (libraries). The debug information names
// the sources under final, where they will be. What the compiler prints
// when it succeeds (warnings) goes to b.warnings.
func (b builder) compile(cc string, flags []string, dir, final, soname, script string, srcs, extra []string) error {
	args := append([]string{}, flags...)
	args = append(args, "-Wl,-soname,"+soname)
	if script != "" {
		args = append(args, "-Wl,--version-script="+path.Join("src", script))
	}
	args = append(args, "-fdebug-prefix-map="+dir+"="+final, "-o", soname)
	for _, f := range srcs {
		args = append(args, path.Join("src", f))
	}
	args = append(args, extra...)
	cmd := command(cc, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return &CompileError{Command: append([]string{cc}, args...), Dir: dir, Output: string(out), Err: err}
	}
	if len(out) > 0 && b.warnings != nil {
		fmt.Fprintf(b.warnings, "vrdma: the compiler warned while building the guest library's %s (the build goes on; please report this):\n%s", soname, out)
	}
	return nil
}

// publish renames the sealed build tmp to final. When another process
// published final first (the rename finds a directory that is not empty),
// its build is used instead: the caller checks it as it would check ours.
// An empty final is replaced by the rename.
func publish(tmp, final string) error {
	err := os.Rename(tmp, final)
	if err == nil || errors.Is(err, syscall.EEXIST) || errors.Is(err, syscall.ENOTEMPTY) {
		return nil
	}
	return fmt.Errorf("guest library: cannot move the build into place: %w", err)
}

// sourceFiles lists src's regular files, slash-separated and sorted.
func sourceFiles(src fs.FS) ([]string, error) {
	var files []string
	err := fs.WalkDir(src, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("guest library: reading the embedded sources: %w", err)
	}
	sort.Strings(files)
	return files, nil
}

// cacheKey hashes what the build depends on: every file's name and
// contents, the compiler's version text and the flags.
func cacheKey(src fs.FS, files []string, ccVersion []byte, flags []string) (string, error) {
	h := sha256.New()
	field := func(b []byte) {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	field([]byte(keyVersion))
	for _, f := range files {
		data, err := fs.ReadFile(src, f)
		if err != nil {
			return "", fmt.Errorf("guest library: reading the embedded sources: %w", err)
		}
		field([]byte(f))
		field(data)
	}
	field(ccVersion)
	field([]byte(strings.Join(flags, "\x00")))
	field([]byte(strings.Join(libs, "\x00")))
	return hex.EncodeToString(h.Sum(nil)[:16]), nil
}

// writeSources copies files from src into dir, keeping their paths.
func writeSources(src fs.FS, files []string, dir string) error {
	for _, f := range files {
		data, err := fs.ReadFile(src, f)
		if err != nil {
			return fmt.Errorf("guest library: reading the embedded sources: %w", err)
		}
		dst := filepath.Join(dir, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return fmt.Errorf("guest library: %w", err)
		}
		if err := os.WriteFile(dst, data, 0o644); err != nil {
			return fmt.Errorf("guest library: %w", err)
		}
	}
	return nil
}

// checkHeader asks the compiler whether it finds header, so that a build
// without rdma-core's headers says which package (pkg) to install rather
// than failing on the first #include.
func checkHeader(cc, header, pkg string) error {
	cmd := command(cc, "-std=c11", "-D_GNU_SOURCE", "-E", "-o", os.DevNull, "-x", "c", "-")
	cmd.Stdin = strings.NewReader("#include <" + header + ">\n")
	var out bytes.Buffer
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		return &MissingToolsError{
			Missing:  []string{fmt.Sprintf("rdma-core's headers (the compiler finds no <%s>)", header)},
			Packages: []string{pkg},
			Err:      fmt.Errorf("%v: %s", err, strings.TrimSpace(out.String())),
		}
	}
	return nil
}

// missingCompiler is the error for a compiler not in $PATH; without one the
// headers are looked for where Debian installs them.
func missingCompiler(cc string, err error) error {
	e := &MissingToolsError{
		Missing:  []string{fmt.Sprintf("a C compiler (%s is not in $PATH)", cc)},
		Packages: []string{compilerPackage},
		Err:      err,
	}
	if _, statErr := os.Stat(headersFile); statErr != nil {
		e.Missing = append(e.Missing, "rdma-core's headers ("+headersFile+")")
		e.Packages = append(e.Packages, headersPackage)
	}
	return e
}

// command returns cmd with args, run in the C locale so that its output
// (the version text in the cache key, messages) does not vary with the
// user's language.
func command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	return cmd
}

// MissingToolsError reports that a build needs tools that are not
// installed: a C compiler, rdma-core's headers, or both.
type MissingToolsError struct {
	Missing  []string // what is missing, described for people
	Packages []string // the Debian packages that provide it
	Err      error    // the lookup's error
}

func (e *MissingToolsError) Error() string {
	return fmt.Sprintf("building the guest library (%s) needs %s: install with `apt-get install %s` (Debian, Ubuntu)",
		SOName, strings.Join(e.Missing, " and "), strings.Join(e.Packages, " "))
}

func (e *MissingToolsError) Unwrap() error { return e.Err }

// CompileError reports that the compiler failed on the sources.
type CompileError struct {
	Command []string // the compiler's command line
	Dir     string   // where it ran (removed since)
	Output  string   // what the compiler printed
	Err     error    // how it ended
}

func (e *CompileError) Error() string {
	return fmt.Sprintf("compiling the guest library (%s) failed (%v); the compiler said:\n%s\n(command: %s)\n"+
		"a compiler or rdma-core version vrdma has not been built with? please report this output",
		SOName, e.Err, strings.TrimRight(e.Output, "\n"), strings.Join(e.Command, " "))
}

func (e *CompileError) Unwrap() error { return e.Err }
