package guest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Program is a small C program built at run time the way the guest
// libraries are: against the system's rdma-core headers, into the same
// checked, sealed cache. The verbs uplink's helper is one.
type Program struct {
	Name    string   // the executable's name, and the cache directory's prefix
	Src     fs.FS    // its C sources (*.c at the top)
	Header  string   // a system header it needs ("infiniband/verbs.h")
	Package string   // the Debian package that provides Header
	Libs    []string // linker arguments after the sources ("-libverbs")
}

// programFlags are the compiler's flags for a Program.
var programFlags = []string{"-std=c11", "-D_GNU_SOURCE", "-O2", "-g", "-Wall", "-Wextra"}

// BuildProgram returns the path of p's executable built from its sources
// under cacheDir, building it on first use. The cache's checks, key and
// errors are Build's: *MissingToolsError without a compiler or the header,
// *CompileError when the compiler fails, *UnsafeDirError or
// *AlteredBuildError for a cache others could write.
func BuildProgram(cacheDir string, p Program) (string, error) {
	files, err := sourceFiles(p.Src)
	if err != nil {
		return "", err
	}
	var cfiles []string
	for _, f := range files {
		if !strings.Contains(f, "/") && strings.HasSuffix(f, ".c") {
			cfiles = append(cfiles, f)
		}
	}
	if len(cfiles) == 0 {
		return "", fmt.Errorf("%s: no C sources to build", p.Name)
	}
	cc, err := exec.LookPath("cc")
	if err != nil {
		return "", missingCompiler("cc", err)
	}
	version, err := command(cc, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("%s: %s --version failed (%v): check that the C compiler works, or reinstall it with `apt-get install --reinstall %s`", p.Name, cc, err, compilerPackage)
	}
	h := sha256.New()
	for _, part := range [][]byte{[]byte("vrdma program 1"), []byte(p.Name), version,
		[]byte(strings.Join(programFlags, "\x00")), []byte(strings.Join(p.Libs, "\x00"))} {
		fmt.Fprintf(h, "%d:", len(part))
		h.Write(part)
	}
	for _, f := range files {
		data, err := fs.ReadFile(p.Src, f)
		if err != nil {
			return "", fmt.Errorf("%s: reading the embedded sources: %w", p.Name, err)
		}
		fmt.Fprintf(h, "%d:%s%d:", len(f), f, len(data))
		h.Write(data)
	}
	key := hex.EncodeToString(h.Sum(nil)[:16])
	if cacheDir, err = secureDir(cacheDir, 0o700, "the build cache", cacheFix); err != nil {
		return "", err
	}
	final := filepath.Join(cacheDir, p.Name+"-"+key)
	exe := filepath.Join(final, p.Name)
	if _, err := verifyBuild(final); !errors.Is(err, fs.ErrNotExist) {
		if err != nil {
			return "", err
		}
		return exe, nil
	}
	if p.Header != "" {
		if err := checkHeader(cc, p.Header, p.Package); err != nil {
			return "", err
		}
	}
	tmp, err := os.MkdirTemp(cacheDir, ".build-")
	if err != nil {
		return "", fmt.Errorf("%s: cannot build in the cache: %w (set %s to a writable directory)", p.Name, err, CacheEnv)
	}
	defer os.RemoveAll(tmp)
	if err := writeSources(p.Src, files, filepath.Join(tmp, "src")); err != nil {
		return "", err
	}
	args := append([]string{}, programFlags...)
	args = append(args, "-fdebug-prefix-map="+tmp+"="+final, "-o", p.Name)
	for _, f := range cfiles {
		args = append(args, filepath.Join("src", f))
	}
	args = append(args, p.Libs...)
	cmd := command(cc, args...)
	cmd.Dir = tmp
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", &CompileError{Command: append([]string{cc}, args...), Dir: tmp, Output: string(out), Err: err}
	}
	if err := seal(tmp); err != nil {
		return "", err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", fmt.Errorf("%s: %w", p.Name, err)
	}
	if err := publish(tmp, final); err != nil {
		return "", err
	}
	if _, err := verifyBuild(final); err != nil {
		return "", err
	}
	return exe, nil
}
