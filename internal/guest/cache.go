package guest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// CacheEnv names the environment variable that sets the directory builds
// are cached in.
const CacheEnv = "VRDMA_GUEST_CACHE"

// ErrNoCacheDir reports that there is no directory to build the library in.
var ErrNoCacheDir = errors.New("no directory to build the guest library in: set " + CacheEnv + " (or XDG_CACHE_HOME or HOME)")

// DefaultCacheDir returns the directory Build caches builds in: $VRDMA_GUEST_CACHE,
// or vrdma under the user's cache directory ($XDG_CACHE_HOME or ~/.cache).
func DefaultCacheDir() (string, error) {
	if dir := os.Getenv(CacheEnv); dir != "" {
		return dir, nil
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("%w (%v)", ErrNoCacheDir, err)
	}
	return filepath.Join(base, "vrdma"), nil
}
