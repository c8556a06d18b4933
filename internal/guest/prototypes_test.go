package guest

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// rdmaCoreHeaders declare, between them, every function rdma-core's
// libibverbs.so.1 and librdmacm.so.1 export: the installed public headers
// and csrc/rdma_core_private.h, which holds the prototypes of rdma-core's
// uninstalled driver.h, cmd_ioctl.h, cmd_write.h and marshall.h.
var rdmaCoreHeaders = []string{
	"infiniband/verbs.h",
	"rdma/rdma_cma.h",
	"rdma/rdma_verbs.h",
	"rdma/rsocket.h",
	"rdma_core_private.h",
}

// TestExportedPrototypesAreRdmaCores checks the ABI of the drop-in
// libraries by compiling, not by name: first that every symbol of both
// version scripts has a declaration in rdma-core's headers (a C file taking
// the address of each one compiles), then that every source file compiles
// with all of those headers included, so a definition whose prototype
// differs from rdma-core's is a conflicting-types error. (An application
// calls ibv_get_sysfs_path() as `const char *(void)`: a definition of
// another type is a crash in the caller, not a link error.)
func TestExportedPrototypesAreRdmaCores(t *testing.T) {
	cc := requireToolchain(t)
	csrc, err := filepath.Abs("csrc")
	if err != nil {
		t.Fatal(err)
	}
	flags := []string{"-std=c11", "-D_GNU_SOURCE", "-Wall", "-Wextra", "-Werror", "-fsyntax-only", "-I", csrc}
	for _, h := range rdmaCoreHeaders {
		flags = append(flags, "-include", h)
	}

	t.Run("every export is declared by rdma-core", func(t *testing.T) {
		var refs strings.Builder
		for _, lib := range guestLibraries {
			script, err := fs.ReadFile(Sources(), lib.script)
			if err != nil {
				t.Fatal(err)
			}
			syms, err := parseVersionScript(string(script))
			if err != nil {
				t.Fatalf("%s: %v", lib.script, err)
			}
			for _, name := range sortedKeys(syms) {
				if strings.HasPrefix(syms[name], "VRDMA_") {
					continue // vrdma's own interface between its two libraries
				}
				refs.WriteString("\t(const void *)&" + name + ",\n")
			}
		}
		file := filepath.Join(t.TempDir(), "exports.c")
		text := "static const void *const exported[] = {\n" + refs.String() + "};\n" +
			"const void *const *vrdma_exported(void);\nconst void *const *vrdma_exported(void) { return exported; }\n"
		if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(cc, append(flags, file)...).CombinedOutput(); err != nil {
			t.Fatalf("an exported symbol has no declaration in rdma-core's headers (%v): declare its prototype, as rdma-core's header gives it, in csrc/rdma_core_private.h\n%s", err, out)
		}
	})

	t.Run("every definition has rdma-core's prototype", func(t *testing.T) {
		err := fs.WalkDir(Sources(), ".", func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".c") || strings.HasPrefix(p, "tests/") {
				return err
			}
			file := filepath.Join(csrc, filepath.FromSlash(p))
			if out, err := exec.Command(cc, append(flags, file)...).CombinedOutput(); err != nil {
				t.Errorf("%s does not compile with rdma-core's prototypes (%v): give the function rdma-core's signature\n%s", p, err, out)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}
