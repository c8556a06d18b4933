package guesttest

import (
	"os"
	"sync"

	"github.com/vrdma/vrdma/internal/guest"
)

// libraryCache is the build cache Library builds the guest library into:
// one temporary directory per test binary, made on the first call, so
// that the library (several seconds of the compiler) is built once for
// all of a package's tests rather than once for each. guest.Build keys
// its cache on the sources, the compiler and the flags, so every test
// gets the library built from the sources it was compiled with.
// RemoveLibrary removes the directory; a package's TestMain calls it.
var libraryCache struct {
	mu  sync.Mutex
	dir string
}

// buildLibrary is guest.Build into libraryCache (a cached build is checked
// and returned by guest.Build itself; a failed one is tried again).
func buildLibrary() (string, error) {
	libraryCache.mu.Lock()
	defer libraryCache.mu.Unlock()
	if libraryCache.dir == "" {
		dir, err := os.MkdirTemp("", "vrdma-guesttest-")
		if err != nil {
			return "", err
		}
		libraryCache.dir = dir
	}
	return guest.Build(libraryCache.dir)
}

// RemoveLibrary removes what Library built. A package whose tests call
// Library calls it from TestMain after m.Run.
func RemoveLibrary() {
	libraryCache.mu.Lock()
	defer libraryCache.mu.Unlock()
	if libraryCache.dir != "" {
		os.RemoveAll(libraryCache.dir)
		libraryCache.dir = ""
	}
}
