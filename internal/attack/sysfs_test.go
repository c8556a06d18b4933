package attack

import (
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/internal/daemontest"
	"github.com/vrdma/vrdma/internal/guest"
)

// The guest library writes its devices' sysfs entries in a directory whose
// name is predictable (docs/design/device-discovery.md): without
// XDG_RUNTIME_DIR, /tmp/vrdma-sysfs-UID-HASH, HASH of the daemon's socket and
// the instance. Another local user makes it first, open to all, with a
// planted tree, or as a link to a directory of theirs: the library must
// neither read the planted entries nor write the victim's devices (GUIDs,
// GIDs) where the planter reads them.

// sysfsTreeName is the directory the library picks for uid, socket and
// instance (sysfs.c: FNV-1a of the two names, each closed by 0xff).
func sysfsTreeName(uid int, sock, instance string) string {
	h := fnv.New64a()
	h.Write([]byte(sock + "\xff" + instance + "\xff"))
	return fmt.Sprintf("vrdma-sysfs-%d-%016x", uid, h.Sum64())
}

func TestPlantedSysfsTreeIsNotUsed(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the scene needs root: a victim and a planter of another uid")
	}
	lib, err := guest.Build(t.TempDir())
	var missing *guest.MissingToolsError
	if errors.As(err, &missing) {
		t.Skipf("cannot build the guest library here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	probe := filepath.Join(t.TempDir(), "sysfs_probe")
	if out, err := exec.Command("cc", "-std=c11", "-o", probe, "../guest/testdata/sysfs_probe.c", "-libverbs").CombinedOutput(); err != nil {
		t.Fatalf("building the probe: %v\n%s", err, out)
	}
	for _, tc := range []struct {
		name  string
		plant func(t *testing.T, path string)
	}{
		{"a directory open to all", func(t *testing.T, path string) {
			mkdirMode(t, filepath.Join(path, "class", "infiniband", "vrdma0"), 0o777, plantUID, plantUID)
			if err := os.WriteFile(filepath.Join(path, "class", "infiniband", "vrdma0", "node_guid"), []byte("dead:beef:dead:beef\n"), 0o666); err != nil {
				t.Fatal(err)
			}
			chownAll(t, path, plantUID)
			mkdirMode(t, path, 0o777, plantUID, plantUID)
		}},
		{"a link to the planter's directory", func(t *testing.T, path string) {
			target := path + ".target"
			mkdirMode(t, target, 0o777, plantUID, plantUID)
			t.Cleanup(func() { os.RemoveAll(target) })
			if err := os.Symlink(target, path); err != nil {
				t.Fatal(err)
			}
			if err := os.Lchown(path, plantUID, plantUID); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sock := daemontest.Start(t)
			devs, err := vrdma.Devices(vrdma.Options{Socket: sock})
			if err != nil || len(devs) == 0 {
				t.Fatalf("the daemon's devices: %v %v", devs, err)
			}
			planted := filepath.Join(os.TempDir(), sysfsTreeName(0, sock, ""))
			t.Cleanup(func() { os.RemoveAll(planted) })
			tc.plant(t, planted)
			before := tree(t, planted)

			cmd := exec.Command(probe)
			cmd.Env = []string{"LD_LIBRARY_PATH=" + lib, "VRDMA_SOCKET=" + sock, "PATH=/usr/bin:/bin", "TMPDIR=" + os.TempDir()}
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("the probe: %v\n%s", err, out)
			}
			root, guid := "", ""
			for line := range strings.Lines(string(out)) {
				line = strings.TrimSpace(line)
				if v, ok := strings.CutPrefix(line, "sysfs="); ok {
					root = v
				}
				if v, ok := strings.CutPrefix(line, "file node_guid="); ok && guid == "" {
					guid = v
				}
			}
			if root != "" && root != "/sys" {
				t.Cleanup(func() { os.RemoveAll(root) })
			}
			if resolved, _ := filepath.EvalSymlinks(planted); root == planted || (resolved != "" && root == resolved) {
				t.Errorf("the library uses the planted directory %s as its tree", planted)
			}
			g := devs[0].GUID
			if want := fmt.Sprintf("%04x:%04x:%04x:%04x", g>>48, g>>32&0xffff, g>>16&0xffff, g&0xffff); guid != want {
				t.Errorf("node_guid reads %q, want the daemon's %s; the probe printed:\n%s", guid, want, out)
			}
			if after := tree(t, planted); after != before {
				t.Errorf("the library wrote in the planted directory: before\n%s\nafter\n%s", before, after)
			}
		})
	}
}

// tree lists the files under dir (through a link at dir), for comparing.
func tree(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.Walk(real, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s %v %d\n", strings.TrimPrefix(p, real), info.Mode(), info.Size())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
