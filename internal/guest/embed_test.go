package guest

import (
	"debug/elf"
	"errors"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestBuildTheEmbeddedLibrary builds the real library, with the flags users
// build it with, and checks what the dynamic loader will see.
func TestBuildTheEmbeddedLibrary(t *testing.T) {
	cfiles, err := fs.Glob(Sources(), "*.c")
	if err != nil {
		t.Fatal(err)
	}
	if len(cfiles) == 0 {
		t.Skip("csrc/ holds no .c file yet: nothing to build")
	}
	dir, err := Build(t.TempDir())
	var missing *MissingToolsError
	if errors.As(err, &missing) {
		t.Skipf("cannot build the library here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(filepath.Join(dir, SOName))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if soname, err := f.DynString(elf.DT_SONAME); err != nil || !slices.Equal(soname, []string{SOName}) {
		t.Errorf("soname %q (%v), want [%s]", soname, err, SOName)
	}
	needed, err := f.DynString(elf.DT_NEEDED)
	if err != nil {
		t.Fatal(err)
	}
	for _, lib := range needed {
		if strings.HasPrefix(lib, "libibverbs") || strings.HasPrefix(lib, "librdmacm") {
			t.Errorf("the library needs %s: it must not load the real rdma-core (needs %q)", lib, needed)
		}
	}
}
