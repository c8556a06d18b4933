package pyverbs

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

// nrHugepages is the sysctl that sets how many huge pages of the default
// size (2 MiB on x86-64) the kernel keeps.
const nrHugepages = "/proc/sys/vm/nr_hugepages"

// suiteHugePages is how many huge pages the suite's three huge-page tests
// (test_odp's two, test_parent_domain's one) need free: each maps one or
// two, and registering moves them.
const suiteHugePages = 8

// reserveHugePages makes sure n 2 MiB huge pages are free for the suite,
// as root raising vm.nr_hugepages by what is missing and setting it back
// at the test's end. It reports whether they are: without them the
// huge-page tests skip ("There are no huge pages of size 2M allocated").
func reserveHugePages(t *testing.T, n int) bool {
	t.Helper()
	free, err := hugePagesFree()
	if err != nil {
		t.Logf("huge pages: %v: the suite's huge-page tests will skip", err)
		return false
	}
	if free >= n {
		return true
	}
	old, err := readInt(nrHugepages)
	if err == nil {
		err = writeInt(nrHugepages, old+n-free)
	}
	if err != nil {
		t.Logf("huge pages: %d free, %d wanted, and %s cannot be raised (%v; as root: sysctl vm.nr_hugepages=%d): the suite's huge-page tests will skip",
			free, n, nrHugepages, err, n)
		return false
	}
	t.Cleanup(func() {
		if err := writeInt(nrHugepages, old); err != nil {
			t.Errorf("setting %s back to %d: %v", nrHugepages, old, err)
		}
	})
	if free, err = hugePagesFree(); err != nil || free < n {
		t.Logf("huge pages: only %d free after raising %s (%v): memory too fragmented; the suite's huge-page tests may skip", free, nrHugepages, err)
		return false
	}
	return true
}

// hugePagesFree reads HugePages_Free from /proc/meminfo.
func hugePagesFree() (int, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "HugePages_Free:"); ok {
			return strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return 0, fmt.Errorf("/proc/meminfo has no HugePages_Free: a kernel without huge pages")
}

func readInt(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

func writeInt(path string, v int) error {
	return os.WriteFile(path, []byte(strconv.Itoa(v)+"\n"), 0o644)
}
