package verbs

import (
	"embed"
	"fmt"
	"io/fs"
	"os"
	"syscall"
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
		return prebuilt, checkPrebuilt(prebuilt)
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

// checkPrebuilt refuses a prebuilt helper that another user could have
// written: it runs as the daemon's user, often root. It must be a regular
// file owned by the daemon's user or root and not writable by group or
// others.
func checkPrebuilt(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return &Error{Kind: ErrBuild, Msg: fmt.Sprintf("the prebuilt helper %s: %v", path, err)}
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.Mode().IsRegular():
		return &Error{Kind: ErrBuild, Msg: fmt.Sprintf("the prebuilt helper %s is not a regular file", path)}
	case fi.Mode().Perm()&0o022 != 0:
		return &Error{Kind: ErrBuild, Msg: fmt.Sprintf("refusing the prebuilt helper %s: mode %04o lets others change it; chmod go-w it", path, fi.Mode().Perm())}
	case ok && st.Uid != 0 && int(st.Uid) != os.Geteuid():
		return &Error{Kind: ErrBuild, Msg: fmt.Sprintf("refusing the prebuilt helper %s: it belongs to uid %d, not to this daemon's user or root", path, st.Uid)}
	}
	return nil
}
