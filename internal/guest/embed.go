package guest

import (
	"embed"
	"io/fs"
)

// embedded holds csrc/: the library's C sources, header, version script and
// the C unit tests under csrc/tests/.
//
//go:embed csrc
var embedded embed.FS

// Sources returns the library's sources: the files of csrc/, at the root of
// the returned file system (chan.c, vrdma.h, libibverbs.map, tests/...).
func Sources() fs.FS {
	sub, err := fs.Sub(embedded, "csrc")
	if err != nil {
		panic("guest: the embedded sources have no csrc directory: " + err.Error()) // cannot happen: csrc is embedded
	}
	return sub
}
