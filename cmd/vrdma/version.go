package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/vrdma/vrdma/internal/perf"
	"github.com/vrdma/vrdma/internal/proto"
)

// version is the release this binary is, when the build says so:
//
//	go build -ldflags "-X main.version=1.2.3" ./cmd/vrdma
//
// Otherwise it is the module's version that `go install
// github.com/vrdma/vrdma/cmd/vrdma@VERSION` records, or, in a build from a
// clone, the release being developed, marked so, with the commit.
var version string

// runVersion prints the version (vrdma version, vrdma --version).
func runVersion(args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		return usagef("version takes no arguments, got %q", args)
	}
	fmt.Fprint(stdout, versionText())
	return nil
}

// versionText is what vrdma version prints: the release, the Go release
// and platform the binary was built with, and the version of the protocol
// between the library and the daemon (both ends must speak the same).
func versionText() string {
	v, commit := version, ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
		var rev, modified string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				modified = s.Value
			}
		}
		if rev != "" {
			commit = ", commit " + rev[:min(len(rev), 12)]
			if modified == "true" {
				commit += " with local changes"
			}
		}
	}
	if v == "" {
		v = perf.Version + " (a development build" + commit + ")"
	} else if commit != "" {
		v += " (" + commit[2:] + ")"
	}
	return fmt.Sprintf("vrdma %s\ngo: %s %s/%s\nprotocol: %d\n", v, runtime.Version(), runtime.GOOS, runtime.GOARCH, proto.Version)
}
