// Package interop runs vrdma against an independent RoCEv2 implementation:
// the Linux kernel's Soft-RoCE driver (rdma_rxe) with rdma-core's tools, in
// small QEMU guests booted by the project's shared interop scripts
// (shared/interop next to the module root: setup.sh, guest.sh; see their
// README). Each guest sits on a bridge, br0, in a network namespace of its
// own run; a vrdma daemon started in that namespace (netns.Host's
// StartDaemon) is the host-side peer at 10.47.91.254.
//
//	g := interop.Up(t)                             // guest A, 10.47.91.1, rxe0
//	out := g.Exec(t, "A", 30, "ibv_devinfo -v -d rxe0")
//	d := g.Host(t).StartDaemon(t)                   // a vrdma daemon beside br0
//	id := g.Spawn(t, "A", 60, "ibv_rc_pingpong -d rxe0 -g 1 -s 64 -n 5")
//	d.Vrdma(t, "pingpong", "-g", "1", "-s", "64", "-n", "5", interop.GuestIP("A").String())
//	out, rc := g.Wait(t, "A", id, 60)
//
// The guest's kernel and initramfs (70 MB of Debian kernel package, about
// 60 MB built) are built once by setup.sh into a cache directory,
// /var/tmp/vrdma-interop unless $VRDMA_INTEROP_CACHE says otherwise, and
// rebuilt when setup.sh or the guest's init is newer than them. Each Up gets
// its own run directory and namespace, so test binaries may boot guests at
// the same time; everything is stopped and deleted when the test ends.
// This package's own tests share their guests instead (sharedGuests in
// shared_test.go): booted once per test binary, each test holding them in
// turn and leaving them as they came up.
//
// It needs root, qemu-system-x86_64 and the shared folder; Require skips
// the test, saying what is missing, otherwise. .ci/deps.sh installs the
// packages and fills the cache.
package interop
