package main

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// cli runs the command line as its own process (this test binary, as
// TestMain makes it) and returns its exit code and its output, stdout and
// stderr together.
func cli(t *testing.T, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), cliEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatalf("vrdma %s: %v", strings.Join(args, " "), err)
		}
	}
	return cmd.ProcessState.ExitCode(), string(out)
}

// flagLine is a flag in the flag package's help: "  -name PLACEHOLDER".
var flagLine = regexp.MustCompile(`(?m)^  -([A-Za-z0-9_-]+) (.+)$`)

// Every command and subcommand prints its help, once, for -h and for
// `vrdma help COMMAND [SUBCOMMAND]` alike, exit 0; each flag's placeholder
// is one word (the flag package makes the first `quoted` words of a usage
// text the placeholder, which turned `vrdma switch ca init` into one).
func TestEveryCommandsHelp(t *testing.T) {
	subs := map[string][][]string{
		"vm": {{"create"}, {"show"}, {"delete"}}, "portgroup": {{"add"}, {"show"}, {"delete"}},
		"switch": {{"show"}, {"ca", "init"}}, "host": {{"show"}, {"cert"}}, "guest": {{"build"}, {"path"}},
	}
	var lines [][]string
	for _, c := range commands {
		if c.name == "help" || c.name == "version" {
			continue
		}
		lines = append(lines, []string{c.name})
		for _, s := range subs[c.name] {
			lines = append(lines, append([]string{c.name}, s...))
		}
	}
	for _, args := range lines {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			code, out := cli(t, append(args, "-h")...)
			if code != 0 || strings.TrimSpace(out) == "" {
				t.Fatalf("vrdma %s -h: exit %d, output %q; want its help and exit 0", strings.Join(args, " "), code, out)
			}
			first := strings.SplitN(out, "\n", 2)[0]
			if n := strings.Count(out, first+"\n"); n != 1 {
				t.Errorf("vrdma %s -h prints its help %d times:\n%s", strings.Join(args, " "), n, out)
			}
			for _, m := range flagLine.FindAllStringSubmatch(out, -1) {
				if strings.ContainsAny(m[2], " `") {
					t.Errorf("vrdma %s -h: flag -%s has the placeholder %q: want one word", strings.Join(args, " "), m[1], m[2])
				}
			}
			hcode, hout := cli(t, append([]string{"help"}, args...)...)
			if hcode != 0 || hout != out {
				t.Errorf("vrdma help %s: exit %d:\n%s\nwant exit 0 and what -h prints:\n%s", strings.Join(args, " "), hcode, hout, out)
			}
		})
	}
	if _, out := cli(t, "daemon", "-h"); !strings.Contains(out, "-mode MODE\n") || !strings.Contains(out, "(default 0660)") {
		t.Errorf("vrdma daemon -h shows the socket's mode as:\n%s\nwant it in octal, 0660", out)
	}
}

// `vrdma help` of a command there is not says so and lists the commands.
func TestHelpOfAnUnknownCommand(t *testing.T) {
	code, out := cli(t, "help", "frobnicate")
	if code != 2 || !strings.Contains(out, `unknown command "frobnicate"`) || !strings.Contains(out, "demo, daemon, devices") {
		t.Fatalf("vrdma help frobnicate: exit %d: %s; want exit 2, naming it and listing the commands", code, out)
	}
}

// vrdma --version and vrdma version print the same: the release, the Go
// release and platform, the protocol version.
func TestVersion(t *testing.T) {
	code, out, errs := vrdmaCmd(t, "--version")
	if code != 0 {
		t.Fatalf("vrdma --version: exit %d: %s", code, errs)
	}
	want := regexp.MustCompile(`^vrdma \S.*\ngo: go1\.\d+\S* \w+/\w+\nprotocol: 1\n$`)
	if !want.MatchString(out) {
		t.Errorf("vrdma --version printed:\n%s\nwant it to match %s", out, want)
	}
	if code, out2, errs := vrdmaCmd(t, "version"); code != 0 || out2 != out {
		t.Errorf("vrdma version: exit %d (%s):\n%s\nwant what --version printed:\n%s", code, errs, out2, out)
	}
}
