package verbs

import (
	"embed"
	"fmt"
	"io/fs"
	"os"
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

// BuildFunc builds the helper from Sources and returns its path; package
// verbsbuild has the one vrdma uses (in the guest libraries' cache). It
// is passed in so that this package does not import the guest library's.
type BuildFunc func() (string, error)

// HelperPath returns the helper to run: prebuilt, if given (the daemon's
// --verbs-helper, or $VRDMA_VERBS_HELPER), else what build makes. With
// neither it is an *Error of kind ErrBuild.
func HelperPath(prebuilt string, build BuildFunc) (string, error) {
	if prebuilt == "" {
		prebuilt = os.Getenv(HelperEnv)
	}
	if prebuilt != "" {
		if _, err := os.Stat(prebuilt); err != nil {
			return "", &Error{Kind: ErrBuild, Msg: fmt.Sprintf("the prebuilt helper %s: %v", prebuilt, err)}
		}
		return prebuilt, nil
	}
	if build == nil {
		return "", &Error{Kind: ErrBuild, Msg: "this daemon cannot build it: give a prebuilt one with --verbs-helper or " + HelperEnv}
	}
	return build()
}

// Open builds (or finds) the helper, starts it and opens port of device
// name with it.
func Open(prebuilt string, build BuildFunc, name string, port uint8) (*Device, error) {
	path, err := HelperPath(prebuilt, build)
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
