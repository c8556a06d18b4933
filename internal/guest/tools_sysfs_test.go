package guest

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// What programs that check a device's sysfs entries and device node before
// they use it (UCX, Open MPI, hwloc) find for a vrdma device under the guest
// library: testdata/sysfs_probe.c, linked against rdma-core's libibverbs,
// prints it (docs/design/device-discovery.md).

// probeReport is sysfs_probe's output for the first device: its key=value
// lines, and the files it read ("file NAME=VALUE").
type probeReport struct {
	kv    map[string]string
	files map[string]string
}

// runSysfsProbe builds the probe and runs it on the host's default instance.
func runSysfsProbe(t *testing.T, h *toolHost) probeReport {
	t.Helper()
	cc := requireToolchain(t)
	bin := filepath.Join(t.TempDir(), "sysfs_probe")
	if out, err := exec.Command(cc, "-std=c11", "-Wall", "-Wextra", "-o", bin, "testdata/sysfs_probe.c", "-libverbs").CombinedOutput(); err != nil {
		t.Fatalf("building testdata/sysfs_probe.c: %v\n%s", err, out)
	}
	out := h.run(t, "", bin)
	r := probeReport{kv: map[string]string{}, files: map[string]string{}}
	devices := 0
	for line := range strings.Lines(out) {
		line = strings.TrimRight(line, "\n")
		if name, ok := strings.CutPrefix(line, "file "); ok {
			if k, v, ok := strings.Cut(name, "="); ok && devices == 1 {
				r.files[k] = v
			}
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		if k == "device" {
			devices++
		}
		if devices <= 1 {
			r.kv[k] = v
		}
	}
	if devices == 0 {
		t.Fatalf("the probe found no device; it printed:\n%s", out)
	}
	return r
}

// sysfsGID writes a GID as sysfs does: eight groups of four hex digits.
func sysfsGID(g [16]byte) string {
	var b strings.Builder
	for i := 0; i < 16; i += 2 {
		if i > 0 {
			b.WriteByte(':')
		}
		fmt.Fprintf(&b, "%02x%02x", g[i], g[i+1])
	}
	return b.String()
}

func TestSysfsEntriesReadBackWhatTheDaemonReports(t *testing.T) {
	h := newToolHost(t)
	want := h.devices(t, "")[0]
	r := runSysfsProbe(t, h)
	root := r.kv["sysfs"]

	// Open MPI's check: <ibv_get_sysfs_path()>/class/infiniband is a directory.
	if st, err := os.Stat(filepath.Join(root, "class", "infiniband")); err != nil || !st.IsDir() {
		t.Errorf("ibv_get_sysfs_path() is %q, whose class/infiniband is no directory (%v)", root, err)
	}
	if wantPath := filepath.Join(root, "class", "infiniband", want.Name); r.kv["ibdev_path"] != wantPath {
		t.Errorf("ibdev_path is %q, want %q (in the tree ibv_get_sysfs_path names)", r.kv["ibdev_path"], wantPath)
	}
	// The tree is the user's alone: a tenant cannot read another's devices.
	var st syscall.Stat_t
	if err := syscall.Stat(root, &st); err != nil {
		t.Fatalf("the tree %q: %v", root, err)
	}
	if st.Mode&0o777 != 0o700 || int(st.Uid) != os.Geteuid() {
		t.Errorf("the tree %s has mode %o and owner %d, want 0700 and %d", root, st.Mode&0o777, st.Uid, os.Geteuid())
	}
	if len(want.GIDs) == 0 {
		t.Fatalf("the Go API reports no GID for %s", want.Name)
	}
	if r.kv["verbs_state"] != "4" {
		t.Errorf("ibv_query_port reports state %s, want 4 (ACTIVE)", r.kv["verbs_state"])
	}
	for _, tc := range []struct{ file, want string }{
		{"node_guid", colonGUID(want.GUID)},
		{"sys_image_guid", colonGUID(want.GUID)},
		{"node_type", "1: CA"},
		{"ports/1/state", r.kv["verbs_state"] + ": ACTIVE"},
		{"ports/1/phys_state", "5: LinkUp"},
		{"ports/1/link_layer", "Ethernet"},
		{"ports/1/gids/0", sysfsGID(want.GIDs[0])},
		{"ports/1/gid_attrs/types/0", "RoCE v2"},
		{"device/numa_node", "-1"},
	} {
		if got := r.files[tc.file]; got != tc.want {
			t.Errorf("%s/%s reads %q, want %q", r.kv["ibdev_path"], tc.file, got, tc.want)
		}
	}
	if !regexp.MustCompile(`^[0-9a-f]{8}(,[0-9a-f]{8})*$`).MatchString(r.files["device/local_cpus"]) {
		t.Errorf("device/local_cpus reads %q, want a CPU mask as sysfs writes it", r.files["device/local_cpus"])
	}
	if got, err := netip.ParseAddr(r.files["ports/1/gids/0"]); err != nil || got.As16() != want.GIDs[0] {
		t.Errorf("ports/1/gids/0 reads %q (%v), want %s", r.files["ports/1/gids/0"], err, netip.AddrFrom16(want.GIDs[0]))
	}
}

// realDevices lists the kernel's verbs devices on this host: uverbs names
// and ib device names, from sysfs.
func realDevices(t *testing.T) (uverbs, ibdevs []string) {
	t.Helper()
	for _, c := range []struct {
		dir string
		out *[]string
	}{{"/sys/class/infiniband_verbs", &uverbs}, {"/sys/class/infiniband", &ibdevs}} {
		ents, err := os.ReadDir(c.dir)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		for _, e := range ents {
			*c.out = append(*c.out, e.Name())
		}
	}
	return uverbs, ibdevs
}

func TestDeviceNamesAreNoRealDevices(t *testing.T) {
	h := newToolHost(t)
	r := runSysfsProbe(t, h)
	dev, ibdev, devPath := r.kv["dev_name"], r.kv["ibdev_path"], r.kv["dev_path"]
	// Whatever the host has, or may have later: the kernel's names.
	if regexp.MustCompile(`^uverbs[0-9]+$`).MatchString(dev) {
		t.Errorf("dev_name is %q: the kernel names its own devices so, and /dev/infiniband/%s may be a real one", dev, dev)
	}
	if dev != "vrdma" {
		t.Errorf("dev_name is %q, want vrdma (the node %s)", dev, DeviceNode)
	}
	for _, p := range []string{ibdev, devPath} {
		if p == "" || strings.HasPrefix(p, "/sys/") {
			t.Errorf("a path of the device is %q: not in vrdma's tree, it can name a real device's entries", p)
		}
	}
	uverbs, ibdevs := realDevices(t)
	for _, u := range uverbs {
		if u == dev {
			t.Errorf("dev_name %q is the name of this host's real device /sys/class/infiniband_verbs/%s", dev, u)
		}
	}
	for _, d := range ibdevs {
		if filepath.Join("/sys/class/infiniband", d) == ibdev {
			t.Errorf("ibdev_path %q is this host's real device %s", ibdev, d)
		}
	}
}
