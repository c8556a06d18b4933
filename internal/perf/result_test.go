package perf

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want int
		bad  bool
	}{
		{"64", 64, false}, {"4K", 4096, false}, {"4k", 4096, false}, {"64KiB", 64 << 10, false},
		{"1M", 1 << 20, false}, {"2MB", 2 << 20, false}, {"1G", 1 << 30, false},
		{"0", 0, true}, {"-5", 0, true}, {"12Q", 0, true}, {"", 0, true}, {"3G", 0, true}, {"1.5M", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseSize(tt.in)
		if tt.bad {
			if err == nil || !strings.Contains(err.Error(), "message size") {
				t.Errorf("ParseSize(%q) = %d, %v; want an error naming the message size", tt.in, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
}

func TestResultText(t *testing.T) {
	tests := []struct {
		r    Result
		want []string
	}{
		{Result{Test: "rc_bw", BW: 2.77e9, MsgRate: 42000}, []string{"rc_bw:\n", "bw        =  2.77 GB/sec"}},
		{Result{Test: "rc_lat", LatencyUS: 9.73}, []string{"latency   =  9.73 us"}},
		{Result{Test: "rc_lat", LatencyUS: 0.25}, []string{"latency   =  250 ns"}},
		{Result{Test: "rc_compare_swap_mr", MsgRate: 190000}, []string{"msg_rate  =  190 K/sec"}},
	}
	for _, tt := range tests {
		var b bytes.Buffer
		tt.r.WriteText(&b, false)
		for _, w := range tt.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("%s: text %q lacks %q", tt.r.Test, b.String(), w)
			}
		}
	}
}

func TestResultJSONKeys(t *testing.T) {
	var b bytes.Buffer
	r := Result{Test: "rc_rdma_write_bw", MsgSize: 1 << 20, BW: 2e10, MsgRate: 19000, Seconds: 2}
	if err := r.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	if strings.Count(b.String(), "\n") != 1 {
		t.Fatalf("not one line: %q", b.String())
	}
	var m map[string]any
	if err := json.Unmarshal(b.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"test", "msg_size", "bw", "msg_rate"} {
		if _, ok := m[k]; !ok {
			t.Errorf("JSON lacks key %q: %s", k, b.String())
		}
	}
}

func TestValidateNamesTheTests(t *testing.T) {
	c := Config{Tests: []string{"rc_lat", "rc_nope"}}
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "rc_nope") || !strings.Contains(err.Error(), "rc_rdma_write_bw") {
		t.Fatalf("Validate = %v; want the unknown name and the known ones", err)
	}
	for _, n := range TestNames() {
		if n == "conf" {
			continue
		}
		if _, ok := tests[n]; !ok {
			t.Errorf("TestNames lists %q, which has no implementation", n)
		}
	}
}
