package verbs

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/vrdma/vrdma/internal/guest"
)

//go:embed csrc
var csrc embed.FS

// HelperName is the helper executable's name.
const HelperName = "vrdma-verbs-helper"

// Sources returns the helper's C sources (helper.c at the top).
func Sources() fs.FS {
	sub, err := fs.Sub(csrc, "csrc")
	if err != nil {
		panic("verbs: the embedded sources have no csrc directory: " + err.Error()) // cannot happen
	}
	return sub
}

// HelperPath returns the helper to run: prebuilt, if given (the daemon's
// --verbs-helper, or $VRDMA_VERBS_HELPER), else built from the embedded
// sources in the guest libraries' cache (guest.DefaultCacheDir) on first
// use. A missing compiler or header is an *Error of kind ErrBuild that
// says what to apt-get install.
func HelperPath(prebuilt string) (string, error) {
	if prebuilt == "" {
		prebuilt = os.Getenv(HelperEnv)
	}
	if prebuilt != "" {
		if _, err := os.Stat(prebuilt); err != nil {
			return "", &Error{Kind: ErrBuild, Msg: fmt.Sprintf("the prebuilt helper %s: %v", prebuilt, err)}
		}
		return prebuilt, nil
	}
	dir, err := guest.DefaultCacheDir()
	if err != nil {
		return "", &Error{Kind: ErrBuild, Msg: err.Error()}
	}
	p, err := guest.BuildProgram(dir, guest.Program{Name: HelperName, Src: Sources(),
		Header: "infiniband/verbs.h", Package: "libibverbs-dev", Libs: []string{"-libverbs"}})
	var me *guest.MissingToolsError
	var ce *guest.CompileError
	switch {
	case errors.As(err, &me):
		return "", &Error{Kind: ErrBuild, Msg: fmt.Sprintf("it needs %s: install with `apt-get install %s` (Debian, Ubuntu), or give a helper built elsewhere against the same rdma-core with %s",
			strings.Join(me.Missing, " and "), strings.Join(me.Packages, " "), HelperEnv)}
	case errors.As(err, &ce):
		return "", &Error{Kind: ErrBuild, Msg: fmt.Sprintf("the compiler failed:\n%s", strings.TrimSpace(ce.Output))}
	case err != nil:
		return "", &Error{Kind: ErrBuild, Msg: err.Error()}
	}
	return p, nil
}

// Open builds (or finds) the helper, starts it and opens port of device
// name with it.
func Open(prebuilt, name string, port uint8) (*Device, error) {
	path, err := HelperPath(prebuilt)
	if err != nil {
		return nil, err
	}
	h, err := StartHelper(path)
	if err != nil {
		return nil, err
	}
	d, err := OpenDevice(h, name, port)
	if err != nil {
		h.Close()
		return nil, err
	}
	return d, nil
}
