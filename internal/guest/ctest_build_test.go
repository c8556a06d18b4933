package guest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
)

// The C test programs link the library's sources from an archive built
// once per test binary and set of flags: each source of csrc/ and
// csrc/rdmacm/ is compiled once, as many at a time as there are CPUs, not
// once for every test that uses it, and a program takes from the archive
// the objects it calls, wherever the library keeps a function (a test
// names no list of sources). A test that defines a library function
// itself, or #includes a library source to reach its static functions,
// keeps its own: the linker takes an archive's object only for a symbol
// still undefined. A program built with the same flags is built once too.
// TestCUnits builds its programs so too, before it runs them
// (prebuildCPrograms).

var cBuilds struct {
	mu       sync.Mutex
	dir      string // the temporary directory of the archives and programs
	archives map[string]*cBuild
	programs map[string]*cBuild
	made     int // the builds made: each has its directory dir/<its number>
}

// cBuild is one archive or program, built on first use in dir.
type cBuild struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// removeCBuilds removes what the C builds left; TestMain calls it.
func removeCBuilds() {
	cBuilds.mu.Lock()
	defer cBuilds.mu.Unlock()
	if cBuilds.dir != "" {
		os.RemoveAll(cBuilds.dir)
	}
}

// cBuildEntry returns the build of key in table (cBuilds' archives or
// programs), made on the first call with key.
func cBuildEntry(table *map[string]*cBuild, key string) (*cBuild, error) {
	cBuilds.mu.Lock()
	defer cBuilds.mu.Unlock()
	if cBuilds.dir == "" {
		dir, err := os.MkdirTemp("", "vrdma-ctest-")
		if err != nil {
			return nil, err
		}
		cBuilds.dir = dir
	}
	if *table == nil {
		*table = map[string]*cBuild{}
	}
	b := (*table)[key]
	if b == nil {
		cBuilds.made++
		b = &cBuild{dir: filepath.Join(cBuilds.dir, strconv.Itoa(cBuilds.made))}
		(*table)[key] = b
	}
	return b, nil
}

// cArchive returns the archive of the library's sources under csrc (its
// top level and rdmacm/) compiled with cc and flags, building it on the
// first call with these flags.
func cArchive(cc, csrc string, flags []string) (string, error) {
	b, err := cBuildEntry(&cBuilds.archives, strings.Join(flags, "\x00"))
	if err != nil {
		return "", err
	}
	b.once.Do(func() { b.path, b.err = buildCArchive(cc, csrc, flags, b.dir) })
	return b.path, b.err
}

// buildCArchive compiles every library source into dir and archives the
// objects as dir/libvrdma-test.a.
func buildCArchive(cc, csrc string, flags []string, dir string) (string, error) {
	var sources []string
	for _, pattern := range []string{"*.c", filepath.Join(RDMACMDir, "*.c")} {
		m, err := filepath.Glob(filepath.Join(csrc, pattern))
		if err != nil {
			return "", err
		}
		sources = append(sources, m...)
	}
	if len(sources) == 0 {
		return "", fmt.Errorf("no library sources (.c files) in %s", csrc)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	objects := make([]string, len(sources))
	errs := make([]error, len(sources))
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for i, src := range sources {
		rel, err := filepath.Rel(csrc, src)
		if err != nil {
			return "", err
		}
		objects[i] = filepath.Join(dir, strings.ReplaceAll(strings.TrimSuffix(rel, ".c"), "/", "_")+".o")
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			args := append(append([]string(nil), flags...), "-I", csrc, "-c", "-o", objects[i], src)
			if out, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
				errs[i] = fmt.Errorf("%s %s: %v\n%s", cc, strings.Join(args, " "), err, out)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return "", err
		}
	}
	archive := filepath.Join(dir, "libvrdma-test.a")
	args := append([]string{"rcs", archive}, objects...)
	if out, err := exec.Command("ar", args...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("ar %s: %v (ar is in Debian's binutils)\n%s", strings.Join(args, " "), err, out)
	}
	return archive, nil
}

// cProgram returns csrc/tests/<file> compiled with cc and flags and linked
// with the library's archive built with the same flags, building it on the
// first call with this file and these flags.
func cProgram(cc, csrc string, flags []string, file string) (string, error) {
	b, err := cBuildEntry(&cBuilds.programs, strings.Join(append([]string{file}, flags...), "\x00"))
	if err != nil {
		return "", err
	}
	b.once.Do(func() {
		var archive string
		if archive, b.err = cArchive(cc, csrc, flags); b.err != nil {
			return
		}
		if b.err = os.MkdirAll(b.dir, 0o700); b.err != nil {
			return
		}
		bin := filepath.Join(b.dir, strings.TrimSuffix(file, ".c"))
		args := append(append([]string(nil), flags...), "-I", csrc, "-o", bin, filepath.Join(csrc, "tests", file), archive, "-lpthread")
		if out, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
			b.err = fmt.Errorf("%s %s: %v\n%s", cc, strings.Join(args, " "), err, out)
			return
		}
		b.path = bin
	})
	return b.path, b.err
}

// prebuildCPrograms builds csrc/tests/<file> for every file and flag set,
// as many at a time as GOMAXPROCS, for cProgram's later callers, who get
// the program or the error.
func prebuildCPrograms(cc, csrc string, flagSets [][]string, files []string) {
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for _, flags := range flagSets {
		for _, file := range files {
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				_, _ = cProgram(cc, csrc, flags, file)
			})
		}
	}
	wg.Wait()
}
