package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/vrdma/vrdma/internal/daemontest"
)

// startPerfServer runs `vrdma perf` with args (a server) until the test ends
// and returns its port and, once it has stopped, its output.
func startPerfServer(t *testing.T, args ...string) (port string, output func() (string, string)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut bytes.Buffer
	addr := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() {
		done <- perfMain(ctx, append([]string{"--listen-port", "0"}, args...), &out, &errOut, func(a net.Addr) { addr <- a })
	}()
	select {
	case a := <-addr:
		port = strconv.Itoa(a.(*net.TCPAddr).Port)
	case err := <-done:
		t.Fatalf("the server ended at once: %v: %s", err, errOut.String())
	}
	stopped := false
	stop := func() (string, string) {
		if !stopped {
			stopped = true
			cancel()
			if err := <-done; err != nil {
				t.Errorf("the server ended with %v; want nil when its context ends", err)
			}
		}
		return out.String(), errOut.String()
	}
	t.Cleanup(func() { stop() })
	return port, stop
}

// freePort returns a TCP port nothing listens on.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

func TestPerfClientAgainstServer(t *testing.T) {
	sock := daemontest.Start(t)
	for _, n := range []string{"srv", "cli"} {
		if code, _, errs := vrdmaCmd(t, "vm", "create", n, "--socket", sock); code != 0 {
			t.Fatalf("vm create %s: %s", n, errs)
		}
	}
	port, serverOutput := startPerfServer(t, "--socket", sock, "--instance", "srv", "-v")
	client := []string{"perf", "127.0.0.1", "-lp", port, "--socket", sock, "--instance", "cli", "-t", "0.2", "-m", "4K"}

	code, out, errs := vrdmaCmd(t, append(client, "conf", "rc_bw", "-v", "rc_lat", "rc_rdma_read_bw")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, w := range []string{`(?m)^conf:$`, `(?m)^\s+loc_node\s+=\s+\S`, `(?m)^\s+rem_node\s+=\s+\S`, `(?m)^\s+rem_vrdma\s+=\s+\d`,
		`(?m)^rc_bw:\n\s+bw\s+=\s+[\d.]+ [KMG]?B/sec$`, `(?m)^rc_lat:\n\s+latency\s+=\s+[\d.]+ (ns|us|ms)$`,
		`(?m)^rc_rdma_read_bw:\n\s+bw\s+=`, `(?m)^\s+loc_cpu\s+=\s+\d+%`, `(?m)^\s+rem_cpu\s+=\s+\d+%`} {
		if !regexp.MustCompile(w).MatchString(out) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}

	code, out, errs = vrdmaCmd(t, append(client, "--json", "ud_bw", "rc_rdma_write_lat")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2:\n%s", len(lines), out)
	}
	for _, l := range lines {
		var r map[string]any
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("not JSON: %q", l)
		}
		if _, ok := r["rem_cpu"]; !ok || r["server"] != "127.0.0.1:"+port {
			t.Errorf("line lacks the server or its CPU load: %s", l)
		}
	}

	sout, serr := serverOutput()
	if serr != "" {
		t.Errorf("the server printed errors:\n%s", serr)
	}
	if got := strings.Count(sout, ": served"); got != 5 {
		t.Errorf("the verbose server printed %d served lines, want 5 (one per test):\n%s", got, sout)
	}
}

func TestPerfBadCommandLinesFailBeforeConnecting(t *testing.T) {
	sock := daemontest.Start(t)
	closed := freePort(t)
	garbage, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer garbage.Close()
	go func() {
		for {
			c, err := garbage.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("220 smtp.example.com ESMTP\r\n"))
			c.Close()
		}
	}()
	garbagePort := strconv.Itoa(garbage.Addr().(*net.TCPAddr).Port)
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"127.0.0.1", "-lp", closed, "rc_frob"}, 2, `unknown test "rc_frob"`},
		{[]string{"127.0.0.1", "-lp", closed, "-m", "12Q", "rc_bw"}, 2, "message size"},
		{[]string{"127.0.0.1", "-lp", closed}, 2, "name at least one test"},
		{[]string{"rc_lat", "rc_bw"}, 2, `"rc_lat" is a test, not a host`},
		{[]string{"127.0.0.1", "-lp", closed, "--threads", "2", "rc_lat"}, 2, "only with --loopback"},
		{[]string{"127.0.0.1", "-lp", closed, "--random", "rc_bw"}, 2, "only with --loopback"},
		{[]string{"127.0.0.1", "-lp", "70000", "rc_lat"}, 2, "1 to 65535"},
		{[]string{"-m", "4K"}, 2, "a server (vrdma perf without a test) takes"},
		{[]string{"--loopback", "-d", "vrdma1", "rc_lat"}, 2, "--loopback makes its own two instances"},
		{[]string{"--loopback", "--max-clients", "8", "rc_lat"}, 2, "--loopback makes its own two instances"},
		{[]string{"127.0.0.1", "-lp", closed, "--max-clients", "8", "rc_lat"}, 2, "a server's option"},
		{[]string{"-lp", closed, "--max-clients", "0"}, 2, "--max-clients 0: give 1 to 1024"},
		{[]string{"127.0.0.1", "-lp", closed, "--socket", sock, "rc_lat"}, 1, "connecting to 127.0.0.1:" + closed},
		{[]string{"127.0.0.1", "-lp", garbagePort, "--socket", sock, "rc_lat"}, 1, "is not a vrdma perf message"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, _, errs := vrdmaCmd(t, append([]string{"perf"}, tt.args...)...)
			if code != tt.code || !strings.Contains(errs, tt.want) {
				t.Fatalf("exit %d (want %d), stderr %q (want %q)", code, tt.code, errs, tt.want)
			}
		})
	}
}

func TestPerfServerConfigTakesMaxClients(t *testing.T) {
	tests := []struct {
		args []string
		want int // ServerConfig.MaxClients; -1: a usage error
	}{
		{nil, 0}, // perf.Serve's default
		{[]string{"--max-clients", "8"}, 8},
		{[]string{"--max-clients=1", "-v"}, 1},
		{[]string{"--max-clients", "1024"}, 1024},
		{[]string{"--max-clients", "0"}, -1},
		{[]string{"--max-clients", "-3"}, -1},
		{[]string{"--max-clients", "1025"}, -1},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			f, names, err := parsePerfArgs(tt.args)
			if err != nil || len(names) != 0 {
				t.Fatalf("parsePerfArgs: %v, names %q", err, names)
			}
			cfg, err := f.serverConfig(nil, nil)
			switch {
			case tt.want < 0 && err == nil:
				t.Fatalf("MaxClients %d accepted; want a usage error", cfg.MaxClients)
			case tt.want >= 0 && err != nil:
				t.Fatalf("error %v; want MaxClients %d", err, tt.want)
			case tt.want >= 0 && cfg.MaxClients != tt.want:
				t.Fatalf("MaxClients %d, want %d", cfg.MaxClients, tt.want)
			}
		})
	}
}
