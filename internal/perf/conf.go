package perf

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// Version is the vrdma release perf reports.
const Version = "0.1.0"

// Conf is who and what is measuring, one end's part of qperf's conf test.
type Conf struct {
	Node    string `json:"node"`
	CPU     string `json:"cpu"`
	OS      string `json:"os"`
	Version string `json:"vrdma"`
}

// confFieldMax bounds each field of a Conf, which a server sends to its
// clients in a message of bounded size.
const confFieldMax = 200

// LocalConf describes this host.
func LocalConf() Conf {
	host, _ := os.Hostname()
	var u unix.Utsname
	_ = unix.Uname(&u)
	return Conf{
		Node:    clip(host, confFieldMax),
		CPU:     clip(fmt.Sprintf("%d Cores: %s", runtime.NumCPU(), cpuModel()), confFieldMax),
		OS:      clip(unix.ByteSliceToString(u.Sysname[:])+" "+unix.ByteSliceToString(u.Release[:]), confFieldMax),
		Version: fmt.Sprintf("%s (%s)", Version, runtime.Version()),
	}
}

// WriteConf prints qperf's conf test: this host (loc_) with the pid of
// the daemon it uses and, in a client, the server's host (rem_).
func WriteConf(w io.Writer, loc Conf, daemonPID int, rem *Conf) {
	fmt.Fprintf(w, "conf:\n")
	fmt.Fprintf(w, "    loc_node   =  %s\n", loc.Node)
	fmt.Fprintf(w, "    loc_cpu    =  %s\n", loc.CPU)
	fmt.Fprintf(w, "    loc_os     =  %s\n", loc.OS)
	fmt.Fprintf(w, "    loc_vrdma  =  %s\n", loc.Version)
	if rem != nil {
		fmt.Fprintf(w, "    rem_node   =  %s\n", rem.Node)
		fmt.Fprintf(w, "    rem_cpu    =  %s\n", rem.CPU)
		fmt.Fprintf(w, "    rem_os     =  %s\n", rem.OS)
		fmt.Fprintf(w, "    rem_vrdma  =  %s\n", rem.Version)
	}
	fmt.Fprintf(w, "    daemon_pid =  %d\n", daemonPID)
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "model name") {
			if i := strings.IndexByte(line, ':'); i >= 0 {
				return strings.TrimSpace(line[i+1:])
			}
		}
	}
	return "unknown"
}

// clip shortens s to at most n bytes, at a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
