package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/vrdma/vrdma/internal/guest"
)

const guestUsage = "guest build [--out DIR] | guest path"

const guestHelp = `The guest library is vrdma's drop-in libibverbs.so.1 and librdmacm.so.1, which
put unmodified verbs and rdma_cm programs on vrdma adapters (vrdma run uses
them).

  guest build            builds it into the cache ($VRDMA_GUEST_CACHE or
                         ~/.cache/vrdma) if it is not there, prints its directory
  guest build --out DIR  also copies libibverbs.so.1 and librdmacm.so.1 (and
                         their .so links) into DIR, for a system-wide install
                         or a container image; DIR and the directories above
                         it must be writable by nobody but you and root; as
                         root, it also makes /dev/infiniband/vrdma, the node
                         UCX looks for (docs/design/device-discovery.md), or
                         says why it could not
  guest path             prints the directory, building it on first use:
                         LD_LIBRARY_PATH=$(vrdma guest path) ibv_devinfo

The build needs a C compiler and rdma-core's headers:
apt-get install gcc libibverbs-dev librdmacm-dev. See docs/guest-library.md.

`

// runGuest builds the guest library and prints where it is.
func runGuest(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("guest", flag.ContinueOnError)
	out := fs.String("out", "", "also install the library into `DIR` (guest build)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: vrdma %s\n\n%s", guestUsage, guestHelp)
		fs.PrintDefaults()
	}
	sub := ""
	if len(args) > 0 && args[0] != "" && args[0][0] != '-' {
		sub, args = args[0], args[1:]
	}
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	switch {
	case sub == "":
		return usagef("name a command: vrdma %s", guestUsage)
	case sub == "help":
		fs.SetOutput(stderr)
		fs.Usage()
		return nil
	case sub != "build" && sub != "path":
		return usagef("unknown guest command %q: vrdma %s", sub, guestUsage)
	case len(pos) > 0:
		return usagef("guest %s takes no arguments, got %q", sub, pos)
	case sub == "path" && *out != "":
		return usagef("guest path prints where the library is built; to copy it elsewhere: vrdma guest build --out %s", *out)
	}
	libDir, err := buildGuest()
	if err != nil {
		return err
	}
	if *out != "" {
		dir, err := filepath.Abs(*out)
		if err != nil {
			return err
		}
		if err := guest.Install(libDir, dir); err != nil {
			return err
		}
		if os.Geteuid() == 0 { // an install: the device node too (devnode.go)
			// Only UCX needs the node, and a container gets it at
			// run time (--device): an image build by a root that
			// cannot make nodes (a user namespace) still installs.
			if err := guest.EnsureDeviceNode(); err != nil {
				fmt.Fprintf(stderr, "vrdma guest: the library is installed, but programs such as UCX will not see vrdma's devices: %v\n", err)
			}
		}
		libDir = dir
	}
	fmt.Fprintln(stdout, libDir)
	return nil
}
