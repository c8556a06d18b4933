package main

import (
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/vrdma/vrdma/internal/daemontest"
)

// Every server the command line runs on a TCP port says, when another
// program holds the port, that it is so and which flag picks another.
func TestServersSayWhichFlagWhenTheirPortIsTaken(t *testing.T) {
	sock := daemontest.Start(t)
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	for _, tt := range []struct {
		name string
		args []string
		flag string
	}{
		{"perf server", []string{"perf", "-lp", port, "--socket", sock}, "--listen-port"},
		{"pingpong server", []string{"pingpong", "-p", port, "--socket", sock}, "-p (--port)"},
		{"ping responder", []string{"ping", "-S", "-p", port, "--socket", sock}, "choose another with -p"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errs := vrdmaCmd(t, tt.args...)
			if code != 1 || !strings.Contains(errs, "address already in use") ||
				!strings.Contains(errs, "another program uses TCP port "+port) || !strings.Contains(errs, tt.flag) {
				t.Fatalf("vrdma %s: exit %d: %s\nwant exit 1 saying that another program uses port %s and to choose another with %s",
					strings.Join(tt.args, " "), code, errs, port, tt.flag)
			}
		})
	}
}
