package main

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/internal/daemontest"
)

// TestKilledPerfLeavesNoInstance: `vrdma perf --loopback` killed with
// SIGKILL mid-run cannot delete its two instances; they are temporary, so
// the daemon does once the process's connections are gone.
func TestKilledPerfLeavesNoInstance(t *testing.T) {
	sock := daemontest.Start(t)
	adm, err := vrdma.DialAdmin(vrdma.Options{Socket: sock})
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	perf := exec.Command(os.Args[0], "perf", "--loopback", "--socket", sock, "-t", "600", "rc_bw")
	perf.Env = append(os.Environ(), cliEnv+"=1")
	var out strings.Builder
	perf.Stdout, perf.Stderr = &out, &out
	if err := perf.Start(); err != nil {
		t.Fatal(err)
	}
	defer perf.Process.Kill()
	names := []string{fmt.Sprintf("perf-a-%d", perf.Process.Pid), fmt.Sprintf("perf-b-%d", perf.Process.Pid)}
	present := func() (n int) {
		insts, err := adm.Instances()
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range insts {
			for _, name := range names {
				if i.Name == name && i.Sessions > 0 {
					if !i.Temporary {
						t.Fatalf("perf's instance %s is not temporary", name)
					}
					n++
				}
			}
		}
		return n
	}
	deadline := time.Now().Add(30 * time.Second) // hang guards
	for present() < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("perf's instances %v never had processes attached; perf said:\n%s", names, out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := perf.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = perf.Wait()
	deadline = time.Now().Add(30 * time.Second)
	for {
		insts, err := adm.Instances()
		if err != nil {
			t.Fatal(err)
		}
		left := []string{}
		for _, i := range insts {
			if strings.HasPrefix(i.Name, "perf-") {
				left = append(left, i.Name)
			}
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("instances %v outlived the killed perf", left)
		}
		time.Sleep(5 * time.Millisecond)
	}
	for {
		st, err := adm.Stats()
		if err != nil {
			t.Fatal(err)
		}
		if st == (vrdma.DaemonStats{Sessions: 1}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the killed perf the daemon counts %+v: only this test's connection should be left", st)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
