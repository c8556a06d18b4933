package attack

// XRC across tenants: uid 4002 opens an XRC domain with a file anyone may
// read and makes an XRC SRQ in it; uid 4001 opens the same file. The
// kernel would give it the same domain (it shares domains by inode); the
// daemon gives each uid its own (cmd_xrc.go), so 4001 finds no domain
// without O_CREAT (EAGAIN), and a SEND of its own XRC_SEND QP naming
// 4002's SRQ number through its own XRC_RECV QP is a remote invalid
// request: 4002's SRQ receives nothing. Needs root, gcc and
// libibverbs-dev (the tenants are a C program through the guest library).

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vrdma/vrdma/internal/guest/guesttest"
)

func TestXRCDomainOfAnotherTenant(t *testing.T) {
	sock := soloDaemon(t, false)
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("no gcc")
	}
	lib := guesttest.Library(t)
	dir, err := os.MkdirTemp("", "vrdma-xrc-attack-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "xrc_tenant")
	if out, err := exec.Command("gcc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-D_GNU_SOURCE", "-o", bin,
		filepath.Join("testdata", "xrc_tenant.c"), "-libverbs").CombinedOutput(); err != nil {
		t.Skipf("building xrc_tenant.c (libibverbs-dev?): %v\n%s", err, out)
	}
	// The guest library, where the tenants may read it.
	libDir := filepath.Join(dir, "lib")
	if err := os.Mkdir(libDir, 0o755); err != nil {
		t.Fatal(err)
	}
	so, err := os.ReadFile(filepath.Join(lib, "libibverbs.so.1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(libDir, "libibverbs.so.1"), so, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "xrc_domain")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(uid int, args ...string) *exec.Cmd {
		cmd := tenantCommand(t, uid, sock)
		cmd.Path, cmd.Args = bin, append([]string{bin}, args...)
		cmd.Env = append(cmd.Env, "LD_LIBRARY_PATH="+libDir)
		return cmd
	}

	victim := run(4002, "victim", file)
	in, err := victim.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	outPipe, err := victim.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	victim.Stderr = victim.Stdout
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = victim.Process.Kill(); _ = victim.Wait() })
	sc := bufio.NewScanner(outPipe)
	var srqn string
	var said []string
	for sc.Scan() {
		said = append(said, sc.Text())
		if n, ok := strings.CutPrefix(sc.Text(), "srqn: "); ok {
			srqn = n
			break
		}
	}
	if srqn == "" {
		t.Fatalf("the victim made no XRC SRQ:\n%s", strings.Join(said, "\n"))
	}

	out, err := run(4001, "attacker", file, srqn).CombinedOutput()
	if err != nil {
		t.Fatalf("attacker: %v\n%s", err, out)
	}
	t.Logf("attacker (uid 4001), naming SRQ %s of uid 4002:\n%s", srqn, out)
	got := lines(string(out))
	if got["open"] != "EAGAIN" {
		t.Errorf("uid 4001 opening uid 4002's domain file without O_CREAT: %q, want EAGAIN (no domain of its own there)", got["open"])
	}
	if got["send"] != "remote invalid request error" {
		t.Errorf("uid 4001's SEND naming uid 4002's SRQ %s: %q, want remote invalid request error", srqn, got["send"])
	}

	in.Close()
	for sc.Scan() {
		said = append(said, sc.Text())
	}
	if err := victim.Wait(); err != nil {
		t.Fatalf("victim: %v\n%s", err, strings.Join(said, "\n"))
	}
	vl := lines(strings.Join(said, "\n"))
	if vl["received"] != "0" {
		t.Errorf("uid 4002's SRQ received %q messages, want 0:\n%s", vl["received"], strings.Join(said, "\n"))
	}
}
