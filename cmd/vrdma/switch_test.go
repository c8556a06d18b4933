package main

import (
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/daemon"
	"github.com/vrdma/vrdma/internal/daemontest"
	"github.com/vrdma/vrdma/switchview"
	"golang.org/x/sys/unix"
)

// startSwitchDaemon runs a daemon, host h1, on a switch of its own (an
// etcd embedded in it, on loopback) until the test ends, and returns its
// socket once h1 holds the subnet manager.
func startSwitchDaemon(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "vrdma-sw-") // short: a socket path has 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	d, err := daemon.New(daemon.Config{SocketPath: filepath.Join(dir, "vrdma.sock"), StateDir: t.TempDir(), HostName: "h1",
		Switch: daemon.SwitchConfig{Enable: true, TCPListen: "127.0.0.1:0", TCPAddrs: []netip.Addr{netip.MustParseAddr("127.0.0.1")}}})
	if err != nil {
		os.RemoveAll(dir)
		t.Fatal(err)
	}
	go d.Serve()
	t.Cleanup(func() {
		d.Close()
		os.RemoveAll(dir)
	})
	sock := d.SocketPath()
	waitSM(t, sock, "h1")
	return sock
}

// waitSM polls `vrdma switch show` until host holds the subnet manager:
// the election takes a moment after the daemon starts.
func waitSM(t *testing.T, sock, host string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute) // a bound on a broken election, not a speed requirement
	for {
		code, out, errs := vrdmaCmd(t, "switch", "show", "--json", "--socket", sock)
		var info switchview.Switch
		if code == 0 && json.Unmarshal([]byte(out), &info) == nil && info.SMHost == host && info.Role == "leader" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never held the subnet manager: exit %d, %s%s", host, code, out, errs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// matchAll fails the test for each regular expression out lacks.
func matchAll(t *testing.T, what, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !regexp.MustCompile(w).MatchString(out) {
			t.Errorf("%s: output lacks %q:\n%s", what, w, out)
		}
	}
}

// mustRun runs the command line and fails the test unless it succeeds.
func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errs := vrdmaCmd(t, args...)
	if code != 0 {
		t.Fatalf("vrdma %s: exit %d: %s", strings.Join(args, " "), code, errs)
	}
	return out
}

func TestSwitchShowAndHostShow(t *testing.T) {
	sock := startSwitchDaemon(t)
	out := mustRun(t, "switch", "show", "--socket", sock)
	matchAll(t, "switch show", out,
		`(?m)^switch:\s+vrdma$`, `(?m)^etcd:\s+unix:///\S+/client\.sock \(embedded in this daemon\)$`, `(?m)^this host:\s+h1$`,
		`(?m)^subnet manager:\s+h1 \(priority 0\)$`, `(?m)^role:\s+leader$`, `(?m)^hosts:\s+1$`, `(?m)^port groups:\s+1$`,
		`(?m)^instances:\s+0$`, `(?m)^fallbacks:\s+0 `, `(?m)^hosts gone:\s+0$`,
		`(?m)^security:\s+loopback only: `, `(?m)^tcp channel:\s+127\.0\.0\.1:\d+ peers 0 accepted 0 refused 0 cut 0 unauthorized 0 wrong_peer 0 dropped 0 spoofed 0$`)
	if out2 := mustRun(t, "switch", "--socket", sock); out2 != out {
		t.Errorf("`vrdma switch` differs from `vrdma switch show`:\n%s\n%s", out2, out)
	}

	out = mustRun(t, "host", "show", "--socket", sock)
	matchAll(t, "host show", out,
		`(?m)^host h1 \* \(this host\)$`, `(?m)^    identity \S+$`, `(?m)^    addresses 127\.0\.0\.1$`, `(?m)^    tcp 127\.0\.0\.1:\d+$`,
		`(?m)^    uplink tcp kind tcp state up$`, `(?m)^    path memcpy: same host h1$`, `(?m)^\* holds the subnet manager$`)
	matchAll(t, "host show h1", mustRun(t, "host", "show", "h1", "--socket", sock), `(?m)^host h1 \* \(this host\)$`)

	var hosts switchview.HostList
	if err := json.Unmarshal([]byte(mustRun(t, "host", "--json", "--socket", sock)), &hosts); err != nil {
		t.Fatal(err)
	}
	if len(hosts.Hosts) != 1 || hostSummary(hosts.Hosts[0]) != "h1 self sm" {
		t.Errorf("host --json: %+v, want h1 alone, self and subnet manager", hosts.Hosts)
	}
	if code, _, errs := vrdmaCmd(t, "host", "show", "h2", "--socket", sock); code != 1 || !strings.Contains(errs, `no host "h2" on the switch`) {
		t.Errorf("host show h2: exit %d, %s", code, errs)
	}
}

func hostSummary(h switchview.Host) string {
	s := h.Name
	if h.Self {
		s += " self"
	}
	if h.SM {
		s += " sm"
	}
	return s
}

func TestPortGroupAddShowDelete(t *testing.T) {
	sock := startSwitchDaemon(t)
	out := mustRun(t, "portgroup", "add", "storage", "--vlan", "100", "--pcp", "3", "--dscp", "26", "--mtu", "4096", "--pkey", "0x8001", "--socket", sock)
	matchAll(t, "portgroup add", out, `(?m)^NAME\s+VLAN\s+PCP\s+DSCP\s+MTU\s+PKEY\s+ADAPTERS$`, `(?m)^storage\s+100\s+3\s+26\s+4096\s+0x8001\s+0$`)
	// Defaults filled in by the switch; the P_Key in decimal.
	out = mustRun(t, "portgroup", "add", "--socket", sock, "plain", "--pkey", "32770")
	matchAll(t, "portgroup add plain", out, `(?m)^plain\s+0\s+0\s+0\s+1024\s+0x8002\s+0$`)

	out = mustRun(t, "portgroup", "--socket", sock)
	matchAll(t, "portgroup", out, `(?m)^default\s+0\s+0\s+0\s+1024\s+0xffff\s+0$`, `(?m)^storage\s+100\s`, `(?m)^plain\s`)
	out = mustRun(t, "portgroup", "show", "storage", "--socket", sock)
	if strings.Contains(out, "default") || !strings.Contains(out, "storage") {
		t.Errorf("portgroup show storage shows others or not it:\n%s", out)
	}
	var list switchview.PortGroupList
	if err := json.Unmarshal([]byte(mustRun(t, "portgroup", "show", "--json", "--socket", sock)), &list); err != nil || len(list.PortGroups) != 3 {
		t.Errorf("portgroup show --json: %v, %+v", err, list)
	}
	matchAll(t, "switch show", mustRun(t, "switch", "show", "--socket", sock), `(?m)^port groups:\s+3$`)

	// An instance on storage keeps it until it goes.
	mustRun(t, "vm", "create", "db", "--portgroup", "storage", "--adapters", "2", "--socket", sock)
	matchAll(t, "portgroup show storage", mustRun(t, "portgroup", "show", "storage", "--socket", sock), `(?m)^storage\s.*\s2$`)
	if code, _, errs := vrdmaCmd(t, "portgroup", "delete", "storage", "--socket", sock); code != 1 || !strings.Contains(errs, "db/vrdma0") {
		t.Errorf("deleting a port group in use: exit %d, %s", code, errs)
	}
	mustRun(t, "vm", "delete", "db", "--socket", sock)

	for _, name := range []string{"storage", "plain"} {
		mustRun(t, "portgroup", "delete", name, "--socket", sock)
		if code, _, errs := vrdmaCmd(t, "portgroup", "show", name, "--socket", sock); code != 1 || !strings.Contains(errs, "vrdma portgroup add "+name) {
			t.Errorf("after delete, portgroup show %s: exit %d, %s", name, code, errs)
		}
	}
	if code, _, errs := vrdmaCmd(t, "portgroup", "delete", "default", "--socket", sock); code != 1 || !strings.Contains(errs, "cannot be deleted") {
		t.Errorf("deleting the default port group: exit %d, %s", code, errs)
	}
	// The daemon checks the name.
	if code, _, errs := vrdmaCmd(t, "portgroup", "add", "bad name", "--socket", sock); code != 1 || !strings.Contains(errs, "bad name") {
		t.Errorf("a bad name: exit %d, %s", code, errs)
	}
}

// canPin reports whether the daemon, in this process, may lock memory.
func canPin() bool {
	var lim unix.Rlimit
	return os.Geteuid() == 0 || unix.Getrlimit(unix.RLIMIT_MEMLOCK, &lim) == nil && lim.Cur == unix.RLIM_INFINITY
}

func TestVMCreateOnSwitch(t *testing.T) {
	sock := startSwitchDaemon(t)
	code, _, errs := vrdmaCmd(t, "vm", "create", "web", "--portgroup", "missing", "--socket", sock)
	if code != 1 || !strings.Contains(errs, "`vrdma portgroup add missing`") {
		t.Fatalf("vm create on a missing port group: exit %d, %s", code, errs)
	}
	mustRun(t, "portgroup", "add", "storage", "--socket", sock)
	dir := t.TempDir()
	tests := []struct {
		name   string
		vmx    string
		args   []string // after vm create
		pin    bool     // needs lockable memory
		create string   // vm create's output
		row    string   // vm show's row
	}{
		{name: "async and native", vmx: `# db1
displayName = "db1"
vrdma0.present = "TRUE"
vrdma1.present = "TRUE"
vrdma0.portGroup = "storage"
vrdma0.nativeEndpointSupport = "TRUE"
vrdma.asyncMode = "TRUE"
memSize = "4096"
`, create: `^instance db1 on host h1, owner \S+: 2 adapters \(vrdma0, vrdma1\), port group storage, async, native endpoints\n$`,
			row: `(?m)^db1\s+h1\s+\S+\s+2\s+true\s+true\s+false\s+storage\s+0\s+-\s+vrdma0,vrdma1$`},
		{name: "async, native and pin", vmx: "displayName = \"db2\"\nvrdma0.present = \"TRUE\"\nvrdma0.nativeEndpointSupport = \"TRUE\"\nvrdma.asyncMode = \"TRUE\"\nsched.mem.pin = \"TRUE\"\n",
			pin: true, create: `^instance db2 on host h1, owner \S+: 1 adapter \(vrdma0\), port group default, async, native endpoints, pinned memory\n$`,
			row: `(?m)^db2\s+h1\s+\S+\s+1\s+true\s+true\s+true\s+default\s+0\s+-\s+vrdma0$`},
		{name: "flags override the file", vmx: "displayName = \"ignored\"\nvrdma0.present = \"TRUE\"\nvrdma.asyncMode = \"TRUE\"\nvrdma0.portGroup = \"storage\"\n",
			args:   []string{"db3", "--async=false", "--adapters", "3", "--portgroup", "default", "--native-endpoints", "--trust-group", "g"},
			create: `^instance db3 on host h1, owner \S+: 3 adapters \(vrdma0, vrdma1, vrdma2\), port group default, native endpoints, trust group g\n$`,
			row:    `(?m)^db3\s+h1\s+\S+\s+3\s+false\s+true\s+false\s+default\s+0\s+g\s+vrdma0,vrdma1,vrdma2$`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.pin && !canPin() {
				t.Skip("pinned memory needs root or an unlimited RLIMIT_MEMLOCK (ulimit -l unlimited)")
			}
			file := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "_")+".vmx")
			if err := os.WriteFile(file, []byte(tt.vmx), 0o644); err != nil {
				t.Fatal(err)
			}
			args := append([]string{"vm", "create", "--file", file, "--socket", sock}, tt.args...)
			matchAll(t, "vm create", mustRun(t, args...), tt.create)
			matchAll(t, "vm show", mustRun(t, "vm", "show", "--socket", sock), `(?m)^INSTANCE\s+HOST\s+OWNER\s+ADAPTERS\s+ASYNC\s+NATIVE\s+PIN\s+PORTGROUP\s+PROCESSES\s+TRUST-GROUP\s+DEVICES$`, tt.row)
		})
	}
	matchAll(t, "vm show db1", mustRun(t, "vm", "show", "db1", "--socket", sock), `(?m)^db1\s`)
	if code, _, errs := vrdmaCmd(t, "vm", "show", "nope", "--socket", sock); code != 1 || !strings.Contains(errs, `no instance "nope"`) {
		t.Errorf("vm show nope: exit %d, %s", code, errs)
	}

	bad := filepath.Join(dir, "bad.vmx")
	if err := os.WriteFile(bad, []byte("displayName = \"x\"\nvrdma0.portGroup = \"a\"\nvrdma1.portGroup = \"b\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := vrdmaCmd(t, "vm", "create", "--file", bad, "--socket", sock); code != 1 || !strings.Contains(errs, "line 3:") || !strings.Contains(errs, "one port group") {
		t.Errorf("a .vmx with two port groups: exit %d, %s", code, errs)
	}
	mustRun(t, "vm", "delete", "db1", "--socket", sock)
	if out := mustRun(t, "vm", "--socket", sock); strings.Contains(out, "db1") {
		t.Errorf("db1 still shown after delete:\n%s", out)
	}
}

func TestPathBetweenInstances(t *testing.T) {
	sock := startSwitchDaemon(t)
	mustRun(t, "vm", "create", "a", "--adapters", "2", "--socket", sock)
	mustRun(t, "vm", "create", "b", "--socket", sock)
	for _, args := range [][]string{{"a", "b"}, {"a/vrdma1", "b/vrdma0"}, {"b", "a/vrdma0"}} {
		out := mustRun(t, append([]string{"path", "--socket", sock}, args...)...)
		if out != "memcpy: same host h1\n" {
			t.Errorf("path %q: %q, want memcpy: same host h1", args, out)
		}
	}
	var resp switchview.Path
	if err := json.Unmarshal([]byte(mustRun(t, "path", "a", "b", "--json", "--socket", sock)), &resp); err != nil {
		t.Fatal(err)
	}
	if resp != (switchview.Path{Kind: "memcpy", Reason: "same host h1", HostA: "h1", HostB: "h1"}) {
		t.Errorf("path --json: %+v", resp)
	}
	tests := []struct {
		a, b string
		code int
		want string
	}{
		{"a/vrdma10", "b", 2, `adapter "a/vrdma10": name it INSTANCE/vrdmaN with N in 0..9`},
		{"a/eth0", "b", 2, `adapter "a/eth0"`},
		{"/vrdma0", "b", 2, `adapter "/vrdma0" has no instance`},
		{"a/vrdma2", "b", 1, `instance "a" has no adapter vrdma2`},
		{"nope", "b", 1, `no instance "nope" on switch vrdma`},
		{"default", "b", 1, `no instance "default"`},
	}
	for _, tt := range tests {
		code, _, errs := vrdmaCmd(t, "path", tt.a, tt.b, "--socket", sock)
		if code != tt.code || !strings.Contains(errs, tt.want) {
			t.Errorf("path %s %s: exit %d (want %d), %q (want %q)", tt.a, tt.b, code, tt.code, errs, tt.want)
		}
	}
}

// A daemon on no switch says so, to every switch command, unchanged.
func TestSwitchCommandsOnNoSwitch(t *testing.T) {
	sock := daemontest.Start(t)
	const noSwitch = "this daemon is on no switch: start it without --no-switch"
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"switch"}, noSwitch},
		{[]string{"switch", "show", "--json"}, noSwitch},
		{[]string{"portgroup", "add", "pg", "--vlan", "10"}, noSwitch},
		{[]string{"portgroup", "show"}, noSwitch},
		{[]string{"portgroup", "show", "pg"}, noSwitch},
		{[]string{"portgroup", "delete", "pg"}, noSwitch},
		{[]string{"host", "show"}, noSwitch},
		{[]string{"path", "a", "b/vrdma1"}, noSwitch},
		{[]string{"vm", "create", "x", "--portgroup", "pg"}, `instance "x": port group "pg" needs a switch and this daemon is on none`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, out, errs := vrdmaCmd(t, append(tt.args, "--socket", sock)...)
			want := "vrdma " + tt.args[0] + ": " + tt.want
			if code != 1 || out != "" || !strings.HasPrefix(errs, want) {
				t.Errorf("exit %d, stdout %q, stderr %q; want 1 and %q", code, out, errs, want)
			}
		})
	}
}

// Bad command lines are usage errors (exit 2) before any call: the socket
// here leads nowhere.
func TestSwitchCommandUsageErrors(t *testing.T) {
	const sock = "/nonexistent/vrdma.sock"
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"switch", "show", "extra"}, "takes no arguments"},
		{[]string{"switch", "frob"}, `unknown switch command "frob"`},
		{[]string{"switch", "show", "--bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"portgroup", "add"}, "name one port group"},
		{[]string{"portgroup", "add", "a", "b"}, "name one port group"},
		{[]string{"portgroup", "add", "a", "--vlan", "4095"}, "VLAN 4095 is out of range"},
		{[]string{"portgroup", "add", "a", "--vlan", "-1"}, `VLAN "-1" is not a number`},
		{[]string{"portgroup", "add", "a", "--pcp", "8"}, "PCP 8 is out of range"},
		{[]string{"portgroup", "add", "a", "--dscp", "64"}, "DSCP 64 is out of range"},
		{[]string{"portgroup", "add", "a", "--dscp", "ef"}, `DSCP "ef" is not a number`},
		{[]string{"portgroup", "add", "a", "--mtu", "1500"}, `MTU "1500": give 256, 512, 1024, 2048 or 4096`},
		{[]string{"portgroup", "add", "a", "--mtu", "0"}, `MTU "0"`},
		{[]string{"portgroup", "add", "a", "--pkey", "0x8000"}, "P_Key 0x8000 has no partition number"},
		{[]string{"portgroup", "add", "a", "--pkey", "0"}, "P_Key 0x0000 has no partition number"},
		{[]string{"portgroup", "add", "a", "--pkey", "0x10000"}, `P_Key "0x10000" is not a 16-bit number`},
		{[]string{"portgroup", "add", "a", "--pkey", "full"}, `P_Key "full" is not a 16-bit number`},
		{[]string{"portgroup", "add", "a", "--vlan"}, "flag needs an argument: -vlan"},
		{[]string{"portgroup", "show", "a", "b"}, "one name at most"},
		{[]string{"portgroup", "delete"}, "name one port group to delete"},
		{[]string{"portgroup", "delete", "a", "b"}, "name one port group to delete"},
		{[]string{"portgroup", "frob"}, `unknown portgroup command "frob"`},
		{[]string{"host", "show", "a", "b"}, "one name at most"},
		{[]string{"host", "frob"}, `unknown host command "frob"`},
		{[]string{"path"}, "name two adapters"},
		{[]string{"path", "a"}, "name two adapters"},
		{[]string{"path", "a", "b", "c"}, "name two adapters"},
		{[]string{"path", "a/vrdma", "b"}, `adapter "a/vrdma"`},
		{[]string{"path", "a/vrdma01", "b"}, `adapter "a/vrdma01"`},
		{[]string{"path", "a", "b/vrdma-1"}, `adapter "b/vrdma-1"`},
		{[]string{"vm", "create"}, "name the instance"},
		{[]string{"vm", "create", "a", "b"}, "one instance name"},
		{[]string{"vm", "create", "a", "--adapters", "two"}, `invalid value "two" for flag -adapters`},
		{[]string{"vm", "create", "a", "--file"}, "flag needs an argument: -file"},
		{[]string{"vm", "show", "a", "b"}, "one name at most"},
		{[]string{"vm", "delete"}, "name one instance to delete"},
		{[]string{"vm", "delete", "a", "b"}, "name one instance to delete"},
		{[]string{"vm", "frob"}, `unknown vm command "frob"`},
		{[]string{"vm", "create", "a", "--bogus"}, "flag provided but not defined: -bogus"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			// --socket after the subcommand, before the rest, which may end
			// in a flag without its value.
			at := min(2, len(tt.args))
			args := append(append(append([]string{}, tt.args[:at]...), "--socket", sock), tt.args[at:]...)
			code, out, errs := vrdmaCmd(t, args...)
			if code != 2 || out != "" || !strings.Contains(errs, tt.want) {
				t.Errorf("exit %d, stdout %q, stderr %q; want 2 and %q", code, out, errs, tt.want)
			}
		})
	}
}
