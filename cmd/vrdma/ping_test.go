package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/internal/daemontest"
)

// startResponder runs `vrdma ping -S` on a free port until the test ends.
func startResponder(t *testing.T, sock string) (*pingResponder, string) {
	t.Helper()
	cfg, err := parsePingArgs([]string{"-S", "--socket", sock, "-p", "0"})
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	r, err := newPingResponder(cfg, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := await(t, done, "the responder"); err != nil {
			t.Errorf("the responder ended with %v", err)
		}
		if stderr.Len() > 0 {
			t.Errorf("the responder complained: %s", stderr.String())
		}
	})
	return r, strconv.Itoa(r.ln.Addr().(*net.TCPAddr).Port)
}

func TestPingRepliesToEveryClient(t *testing.T) {
	sock := daemontest.Start(t)
	r, port := startResponder(t, sock)
	host, _ := os.Hostname()
	label := regexp.QuoteMeta(fmt.Sprintf("%s (GID %s QPN 0x%06x)", host, gidText(r.u.gid), r.u.qp.QPN()))
	pong := regexp.MustCompile(`(?m)^Pong from ` + label + `: time \d+\.\d{3} ms$`)
	summary := []string{
		`(?m)^--- ` + label + ` vrdma ping statistics ---$`,
		`(?m)^3 packets transmitted, 3 received, 0% packet loss, time \d+ ms$`,
		`(?m)^rtt min/avg/max = \d+\.\d{3}/\d+\.\d{3}/\d+\.\d{3} ms$`,
	}
	check := func(t *testing.T, r result) {
		t.Helper()
		if r.code != 0 {
			t.Fatalf("exit %d: %s%s", r.code, r.out, r.err)
		}
		if n := len(pong.FindAllString(r.out, -1)); n != 3 {
			t.Errorf("%d Pong lines, want 3:\n%s", n, r.out)
		}
		for _, w := range summary {
			if !regexp.MustCompile(w).MatchString(r.out) {
				t.Errorf("output lacks %q:\n%s", w, r.out)
			}
		}
	}
	args := []string{"ping", "--socket", sock, "-c", "3", "-f", "-p", port, "127.0.0.1"}
	t.Run("one after another", func(t *testing.T) {
		check(t, await(t, goCmd(args...), "the first client"))
		check(t, await(t, goCmd(args...), "the second client"))
	})
	t.Run("two at once", func(t *testing.T) {
		a, b := goCmd(args...), goCmd(args...)
		check(t, await(t, a, "a client"))
		check(t, await(t, b, "a client"))
	})
}

// fakeResponder writes hello to every TCP client (nothing if empty).
func fakeResponder(t *testing.T, hello string) string {
	t.Helper()
	ln, port := listenLoopback(t)
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = conn.Write([]byte(hello))
			conn.Close()
		}
	}()
	return port
}

func TestPingCountsUnansweredPingsAsLost(t *testing.T) {
	sock := daemontest.Start(t)
	dev, err := vrdma.Open("vrdma0", vrdma.Options{Socket: sock})
	if err != nil {
		t.Fatal(err)
	}
	gid, _ := dev.GID(0)
	dev.Close()
	// A responder that says its QP is one that does not exist: the pings go
	// nowhere, as on a wire that drops them.
	port := fakeResponder(t, string(appendPingHello(nil, pingPeer{QPN: 0xfffff0, QKey: pingQKey, GID: gid, Host: "nobody"})))
	r := await(t, goCmd("ping", "--socket", sock, "-c", "2", "-f", "-w", "0.05", "-p", port, "127.0.0.1"), "the client")
	if r.code != 1 || !strings.Contains(r.err, "no reply from 127.0.0.1") {
		t.Errorf("exit %d (want 1), stderr %q", r.code, r.err)
	}
	for _, w := range []string{"2 packets transmitted, 0 received, 100% packet loss", "rtt min/avg/max = 0.000/0.000/0.000 ms"} {
		if !strings.Contains(r.out, w) {
			t.Errorf("output lacks %q:\n%s", w, r.out)
		}
	}
	if strings.Contains(r.out, "Pong from") {
		t.Errorf("a pong from nowhere:\n%s", r.out)
	}
}

func TestPingFailsClearlyWithoutAResponder(t *testing.T) {
	sock := daemontest.Start(t)
	ln, closed := listenLoopback(t)
	ln.Close()
	tests := []struct {
		name string
		port string
		want string
	}{
		{"closed port", closed, "connection refused: start one there with `vrdma ping -S`"},
		{"another service", fakeResponder(t, "SSH-2.0-OpenSSH_9.2\r\n"), `"SSH-2.0-OpenSSH_9.2\r" is not a vrdma ping responder's hello`},
		{"hangs up", fakeResponder(t, ""), "closed the connection without a hello"},
		{"newer version", fakeResponder(t, "VRDMA-PING/2 000011 11111111 fe800000000000000000000000000001 h\n"), "the responder speaks VRDMA-PING/2, this vrdma VRDMA-PING/1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := await(t, goCmd("ping", "--socket", sock, "-c", "1", "-p", tt.port, "127.0.0.1"), "the client")
			if r.code != 1 || !strings.Contains(r.err, tt.want) {
				t.Fatalf("exit %d (want 1), stderr %q (want %q)", r.code, r.err, tt.want)
			}
		})
	}
}

func TestPingOptions(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{}, "give one HOST to ping"},
		{[]string{"a", "b"}, "give one HOST to ping"},
		{[]string{"-S", "host"}, "a responder (-S) takes no HOST"},
		{[]string{"-c", "-1", "host"}, "-c -1"},
		{[]string{"host", "-w", "0"}, "-w 0"},
		{[]string{"-p", "70000", "host"}, "-p 70000"},
		{[]string{"-g", "-1", "host"}, "-g -1"},
		{[]string{"--bogus", "host"}, "flag provided but not defined: -bogus"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, _, errs := vrdmaCmd(t, append([]string{"ping"}, tt.args...)...)
			if code != 2 || !strings.Contains(errs, tt.want) {
				t.Fatalf("exit %d (want 2), stderr %q (want %q)", code, errs, tt.want)
			}
		})
	}
	cfg, err := parsePingArgs([]string{"peer", "-c", "3", "-f", "-w", "0.5", "-g", "1", "-p", "7", "-d", "vrdma1"})
	if err != nil || cfg.host != "peer" || cfg.count != 3 || !cfg.flood || cfg.timeout.Seconds() != 0.5 || cfg.gidIdx != 1 || cfg.port != 7 || cfg.dev != "vrdma1" {
		t.Errorf("options after HOST: %+v, %v", cfg, err)
	}
}

func TestPingHelloAndDatagrams(t *testing.T) {
	p := pingPeer{QPN: 0x12, QKey: 0x11111111, GID: vrdma.GID{0xfe, 0x80, 15: 1}, Host: "my host"}
	line := string(appendPingHello(nil, p))
	if line != "VRDMA-PING/1 000012 11111111 fe800000000000000000000000000001 my_host\n" {
		t.Errorf("hello %q", line)
	}
	got, err := parsePingHello(strings.TrimSuffix(line, "\n"))
	if p.Host = "my_host"; err != nil || got != p {
		t.Errorf("hello parsed as %+v, %v", got, err)
	}
	for _, bad := range []string{
		"", "VRDMA-PING/1", "VRDMA-PING/1 000012 11111111 fe80 h", "VRDMA-PING/1 1000000 11111111 fe800000000000000000000000000001 h",
		"VRDMA-PING/1 000012 111111111 fe800000000000000000000000000001 h", "VRDMA-PING/1 000012 11111111 fe800000000000000000000000000001 h extra",
	} {
		if p, err := parsePingHello(bad); err == nil {
			t.Errorf("%q parsed as %+v", bad, p)
		}
	}
	var b [pingLen]byte
	putPing(b[:], pingRequest, 7, 12345)
	if kind, seq, ts, ok := parsePing(b[:]); !ok || kind != pingRequest || seq != 7 || ts != 12345 {
		t.Errorf("datagram read back as %d %d %d %v", kind, seq, ts, ok)
	}
	for _, bad := range [][]byte{b[:pingLen-1], append(b[:], 0), append([]byte("xPNG"), b[4:]...)} {
		if _, _, _, ok := parsePing(bad); ok {
			t.Errorf("%q read as a datagram", bad)
		}
	}
}
