// Package verbsbuild builds the verbs uplink's helper (package verbs) from
// its embedded sources the way the guest libraries are built, in their
// checked cache (guest.BuildProgram). It is apart from package verbs so
// that the daemon, which the guest library's tests start, does not import
// the guest library's package.
package verbsbuild

import (
	"errors"
	"fmt"
	"strings"

	"github.com/vrdma/vrdma/internal/guest"
	"github.com/vrdma/vrdma/internal/verbs"
)

// Build returns the helper built in guest.DefaultCacheDir, building it on
// first use. A missing compiler or header is a *verbs.Error of kind
// verbs.ErrBuild that says what to apt-get install.
func Build() (string, error) {
	dir, err := guest.DefaultCacheDir()
	if err != nil {
		return "", &verbs.Error{Kind: verbs.ErrBuild, Msg: err.Error()}
	}
	p, err := guest.BuildProgram(dir, guest.Program{Name: verbs.HelperName, Src: verbs.Sources(),
		Header: "infiniband/verbs.h", Package: "libibverbs-dev", Libs: []string{"-libverbs", "-ldl"}})
	var me *guest.MissingToolsError
	var ce *guest.CompileError
	switch {
	case errors.As(err, &me):
		return "", &verbs.Error{Kind: verbs.ErrBuild, Msg: fmt.Sprintf("it needs %s: install with `apt-get install %s` (Debian, Ubuntu), or give a helper built elsewhere against the same rdma-core with %s",
			strings.Join(me.Missing, " and "), strings.Join(me.Packages, " "), verbs.HelperEnv)}
	case errors.As(err, &ce):
		return "", &verbs.Error{Kind: verbs.ErrBuild, Msg: fmt.Sprintf("the compiler failed:\n%s", strings.TrimSpace(ce.Output))}
	case err != nil:
		return "", &verbs.Error{Kind: verbs.ErrBuild, Msg: err.Error()}
	}
	return p, nil
}
