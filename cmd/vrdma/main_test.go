package main

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/vrdma/vrdma/internal/daemontest"
)

// vrdmaCmd runs the command line with args and returns its exit code and output.
func vrdmaCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestToolsFollowRdmaCoreLayouts(t *testing.T) {
	sock := daemontest.Start(t)
	if code, out, errs := vrdmaCmd(t, "vm", "create", "two", "--adapters", "2", "--socket", sock); code != 0 {
		t.Fatalf("vm create: %d %s %s", code, out, errs)
	}
	tests := []struct {
		name string
		args []string
		want []string // regular expressions, each must match the output
	}{
		{"devices", []string{"devices", "--socket", sock, "--instance", "two"},
			[]string{`(?m)^\s+device\s+node GUID$`, `(?m)^\s+------\s+----------------$`, `(?m)^\s+vrdma0\s+[0-9a-f]{16}$`, `(?m)^\s+vrdma1\s+[0-9a-f]{16}$`}},
		{"devinfo", []string{"devinfo", "--socket", sock, "-d", "vrdma0"},
			[]string{`(?m)^hca_id:\tvrdma0$`, `node_guid:\t+[0-9a-f]{4}:[0-9a-f]{4}:[0-9a-f]{4}:[0-9a-f]{4}`, `phys_port_cnt:\t+1`,
				`state:\t+PORT_ACTIVE \(4\)`, `active_mtu:\t+4096 \(5\)`, `(?m)port_lid:\t+1$`, `link_layer:\t+Ethernet`}},
		{"devinfo -v", []string{"devinfo", "--socket", sock, "-v"},
			[]string{`max_qp:\t+\d+`, `max_cqe:\t+\d+`, `max_mr_size:\t+0x[0-9a-f]+`, `max_ring_bytes:\t+(\d+|unlimited)\n`, `atomic_cap:\t+ATOMIC_GLOB`,
				`GID\[  0\]:\t+fe80:0000:0000:0000:[0-9a-f]{4}:[0-9a-f]{2}ff:fe[0-9a-f]{2}:[0-9a-f]{4}, RoCE v2`}},
		{"stat", []string{"stat", "--socket", sock, "vrdma0"},
			[]string{`(?m)^CA 'vrdma0'$`, `Number of ports: 1`, `State: Active`, `(?m)Base lid: 1$`, `Link layer: Ethernet`, `port_xmit_data: \d+`, `port_rcv_packets: \d+`, `(?m)^\s+copy_bytes: \d+$`, `(?m)^\s+copy_msgs: \d+$`, `(?m)^\s+path_verbs: \d+$`, `(?m)^\s+verbs_bytes: \d+$`}},
		{"vm show", []string{"vm", "show", "--socket", sock},
			[]string{`(?m)^INSTANCE\s+HOST\s+OWNER\s+ADAPTERS`, `(?m)^default\s+test\s+\S+\s+1\s`, `(?m)^two\s+test\s+\S+\s+2\s+false\s+false\s+false\s+default\s+\d+\s+-\s+vrdma0,vrdma1$`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errs := vrdmaCmd(t, tt.args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			for _, w := range tt.want {
				if !regexp.MustCompile(w).MatchString(out) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

func TestBadCommandLinesSayWhatIsWrong(t *testing.T) {
	sock := daemontest.Start(t)
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{[]string{"devinfo", "--socket", sock, "-d", "vrdma7"}, 1, `no device "vrdma7"`},
		{[]string{"devinfo", "--socket", sock, "--bogus"}, 2, "flag provided but not defined: -bogus"},
		{[]string{"stat", "--socket", sock, "--instance", "nope"}, 1, `no instance "nope"`},
		{[]string{"vm", "create", "big", "--adapters", "11", "--socket", sock}, 1, "1 to 10"},
		{[]string{"vm", "create", "bad name!", "--socket", sock}, 1, "instance name"},
		{[]string{"vm", "delete", "default", "--socket", sock}, 1, "cannot be deleted"},
		{[]string{"perf", "--loopback", "--socket", sock, "rc_frob"}, 2, `unknown test "rc_frob"`},
		{[]string{"perf", "--loopback", "--socket", sock, "-m", "12Q", "rc_lat"}, 2, "message size"},
		{[]string{"perf", "rc_lat"}, 2, "--loopback"},
		{[]string{"devices", "--socket", "/nonexistent/vrdma.sock"}, 1, "start it with `vrdma daemon`"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, _, errs := vrdmaCmd(t, tt.args...)
			if code != tt.code || !strings.Contains(errs, tt.want) {
				t.Fatalf("exit %d (want %d), stderr %q (want %q)", code, tt.code, errs, tt.want)
			}
		})
	}
}

func TestPerfJSONLines(t *testing.T) {
	sock := daemontest.Start(t)
	code, out, errs := vrdmaCmd(t, "perf", "--loopback", "--socket", sock, "--json", "-t", "0.1", "-m", "4K",
		"rc_bw", "rc_bi_bw", "rc_lat", "rc_rdma_write_bw", "rc_rdma_write_lat", "rc_rdma_read_bw", "rc_rdma_read_lat",
		"rc_compare_swap_mr", "rc_fetch_add_mr", "ud_bw", "ud_lat")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 11 {
		t.Fatalf("%d lines, want 11:\n%s", len(lines), out)
	}
	for _, l := range lines {
		var r map[string]any
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("not JSON: %q", l)
		}
		test, _ := r["test"].(string)
		size, _ := r["msg_size"].(float64)
		rate, _ := r["msg_rate"].(float64)
		if test == "" || size <= 0 || rate <= 0 {
			t.Errorf("line lacks test, msg_size or msg_rate: %s", l)
		}
		switch {
		case strings.HasSuffix(test, "_bw"):
			if bw, _ := r["bw"].(float64); bw <= 0 {
				t.Errorf("%s has no bw: %s", test, l)
			}
		case strings.HasSuffix(test, "_lat"):
			if lat, _ := r["latency_us"].(float64); lat <= 0 {
				t.Errorf("%s has no latency_us: %s", test, l)
			}
		}
	}
}

func TestPerfTextIsQperfLike(t *testing.T) {
	sock := daemontest.Start(t)
	code, out, errs := vrdmaCmd(t, "perf", "rc_rdma_write_bw", "--loopback", "--socket", sock, "-t", "0.1", "conf", "rc_lat")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, w := range []string{`(?m)^conf:$`, `(?m)^\s+loc_cpu\s+=\s+\d+ Cores`, `(?m)^rc_rdma_write_bw:\n\s+bw\s+=\s+[\d.]+ [KMG]?B/sec$`, `(?m)^rc_lat:\n\s+latency\s+=\s+[\d.]+ (ns|us|ms)$`} {
		if !regexp.MustCompile(w).MatchString(out) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
}

func TestDemoChecksEveryVerb(t *testing.T) {
	code, out, errs := vrdmaCmd(t, "demo", "-t", "0.05")
	if code != 0 {
		t.Fatalf("demo failed (%d): %s\n%s", code, out, errs)
	}
	for _, step := range []string{"SEND", "SEND with immediate", "RDMA WRITE", "RDMA WRITE with immediate", "RDMA READ",
		"compare-and-swap", "fetch-and-add", "UD SEND", "wrong rkey"} {
		if !regexp.MustCompile(`(?m)^  ok    ` + regexp.QuoteMeta(step) + `\s`).MatchString(out) {
			t.Errorf("no ok line for %s:\n%s", step, out)
		}
	}
	if !strings.Contains(out, "memcpy: same host") || !strings.Contains(out, "REM_ACCESS_ERR") || !strings.Contains(out, "rc_rdma_write_bw") {
		t.Errorf("demo output lacks the path, the error or the table:\n%s", out)
	}
	// Three passes — one host, two over RoCEv2, two on a switch over the
	// TCP channel — each with every check, each on its path.
	if n := strings.Count(out, "all 9 checks held"); n != 3 {
		t.Errorf("%d passes held, want 3:\n%s", n, out)
	}
	for _, path := range []string{"path rdma: RoCEv2", "path tcp: IBTA packets over the TCP channel", "(tcp: a datagram over the TCP channel)"} {
		if !strings.Contains(out, path) {
			t.Errorf("demo output lacks %q:\n%s", path, out)
		}
	}
}
