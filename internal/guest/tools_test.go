package guest

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/vrdma/vrdma"
)

// Debian's ibverbs-utils, unmodified, on vrdma adapters through the guest
// library: the device list, the device query and the four pingpongs.

const ibverbsUtils = "ibverbs-utils"

func TestToolIbvDevicesListsTheAdapterWithItsGUID(t *testing.T) {
	requireTool(t, "ibv_devices", ibverbsUtils)
	h := newToolHost(t)
	want := h.devices(t, "")
	got := ibvDevices(t, h.run(t, "", "ibv_devices"))
	if len(want) != 1 || want[0].Name != "vrdma0" {
		t.Fatalf("the Go API lists %+v, want vrdma0 alone", want)
	}
	if g, ok := got["vrdma0"]; !ok || g != fmt.Sprintf("%016x", want[0].GUID) {
		t.Errorf("ibv_devices lists %v, want vrdma0 with GUID %016x", got, want[0].GUID)
	}
	if len(got) != 1 {
		t.Errorf("ibv_devices lists %d devices (%v), want vrdma0 alone", len(got), got)
	}
}

func TestToolIbvDevicesListsEveryAdapterOfTheInstance(t *testing.T) {
	requireTool(t, "ibv_devices", ibverbsUtils)
	requireTool(t, "ibv_devinfo", ibverbsUtils)
	h := newToolHost(t)
	h.createInstance(t, vrdma.InstanceSpec{Name: "two", Adapters: 2})
	want := h.devices(t, "two")
	if len(want) != 2 {
		t.Fatalf("the Go API lists %d adapters of a 2-adapter instance: %+v", len(want), want)
	}
	got := ibvDevices(t, h.run(t, "two", "ibv_devices"))
	if len(got) != 2 {
		t.Errorf("ibv_devices lists %v, want 2 devices", got)
	}
	for _, d := range want {
		if g, ok := got[d.Name]; !ok || g != fmt.Sprintf("%016x", d.GUID) {
			t.Errorf("ibv_devices lists %v, want %s with GUID %016x", got, d.Name, d.GUID)
		}
	}
	var hcas []string
	for line := range strings.Lines(h.run(t, "two", "ibv_devinfo")) {
		if name, ok := strings.CutPrefix(strings.TrimSpace(line), "hca_id:"); ok {
			hcas = append(hcas, strings.TrimSpace(name))
		}
	}
	if !slices.Equal(hcas, []string{"vrdma0", "vrdma1"}) {
		t.Errorf("ibv_devinfo lists hca_id %q, want vrdma0 and vrdma1", hcas)
	}
	// The default instance is not the one VRDMA_INSTANCE names.
	if def := ibvDevices(t, h.run(t, "", "ibv_devices")); len(def) != 1 {
		t.Errorf("without VRDMA_INSTANCE ibv_devices lists %v, want the default instance's vrdma0 alone", def)
	}
}

// ibvDevices parses ibv_devices' table: device name to node GUID, as it
// prints them (16 hex digits).
func ibvDevices(t *testing.T, out string) map[string]string {
	t.Helper()
	devs := map[string]string{}
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if len(f) != 2 || f[0] == "device" || strings.HasPrefix(f[0], "---") {
			continue
		}
		if _, err := strconv.ParseUint(f[1], 16, 64); err != nil || len(f[1]) != 16 {
			t.Fatalf("ibv_devices: %q is not the GUID of %s; it printed:\n%s", f[1], f[0], out)
		}
		devs[f[0]] = f[1]
	}
	return devs
}

func TestToolIbvDevinfoShowsTheActiveEthernetPortAndItsGID(t *testing.T) {
	requireTool(t, "ibv_devinfo", ibverbsUtils)
	h := newToolHost(t)
	want := h.devices(t, "")[0]
	if len(want.GIDs) == 0 {
		t.Fatalf("the Go API reports no GID for %s", want.Name)
	}
	out := h.run(t, "", "ibv_devinfo", "-v")
	info := map[string]string{}
	var gid0 string
	for line := range strings.Lines(out) {
		key, val, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		val = strings.TrimSpace(val)
		if strings.HasPrefix(key, "GID[") && strings.TrimSpace(strings.Trim(key, "GID[]")) == "0" {
			gid0 = val
			continue
		}
		if _, seen := info[key]; !seen { // the first port's, the device's
			info[key] = val
		}
	}
	for key, want := range map[string]string{
		"hca_id":     "vrdma0",
		"state":      "PORT_ACTIVE (4)",
		"link_layer": "Ethernet",
		"node_guid":  colonGUID(want.GUID),
	} {
		if info[key] != want {
			t.Errorf("ibv_devinfo -v: %s is %q, want %q", key, info[key], want)
		}
	}
	addr, _, _ := strings.Cut(gid0, ",") // "fe80::..., RoCE v2"
	got, err := netip.ParseAddr(addr)
	if err != nil {
		t.Fatalf("ibv_devinfo -v: GID[0] %q is not an address (%v); it printed:\n%s", gid0, err, out)
	}
	if got.As16() != want.GIDs[0] {
		t.Errorf("ibv_devinfo -v: GID[0] is %s, the Go API reports %s", got, netip.AddrFrom16(want.GIDs[0]))
	}
}

// colonGUID writes a GUID as ibv_devinfo does: four groups of four hex
// digits.
func colonGUID(g uint64) string {
	return fmt.Sprintf("%04x:%04x:%04x:%04x", g>>48, g>>32&0xffff, g>>16&0xffff, g&0xffff)
}

// pingpongIters is how many exchanges each pingpong makes: enough to go
// around the receive queues, short enough to cost nothing.
const pingpongIters = 200

func TestToolPingpong(t *testing.T) {
	tests := []struct {
		name    string
		program string
		size    int
		args    []string
	}{
		{"rc", "ibv_rc_pingpong", 4096, nil},
		{"rc events", "ibv_rc_pingpong", 4096, []string{"-e"}},
		{"rc new post API", "ibv_rc_pingpong", 4096, []string{"-N"}},
		{"uc", "ibv_uc_pingpong", 4096, nil},
		{"ud", "ibv_ud_pingpong", 1024, nil},
		{"srq", "ibv_srq_pingpong", 4096, nil},
	}
	for _, tt := range tests {
		requireTool(t, tt.program, ibverbsUtils)
	}
	h := newToolHost(t)
	h.createInstance(t, vrdma.InstanceSpec{Name: "ping", Adapters: 1})
	h.createInstance(t, vrdma.InstanceSpec{Name: "pong", Adapters: 1})
	places := []struct {
		name           string
		server, client string // instances
	}{
		{"one instance", "", ""},
		{"two instances", "ping", "pong"},
	}
	for _, tt := range tests {
		for _, pl := range places {
			t.Run(tt.name+"/"+pl.name, func(t *testing.T) {
				port := freePort(t)
				args := append([]string{"-d", "vrdma0", "-g", "0", "-p", strconv.Itoa(port), "-n", strconv.Itoa(pingpongIters),
					"-s", strconv.Itoa(tt.size), "-c"}, tt.args...)
				srv := h.startServer(t, pl.server, port, tt.program, args...)
				cli := h.run(t, pl.client, tt.program, append(args, "127.0.0.1")...)
				checkPingpong(t, "client", cli, tt.size)
				checkPingpong(t, "server", srv.wait(t), tt.size)
			})
		}
	}
}

// checkPingpong checks a pingpong's report: every exchange made and timed,
// every byte counted, the received buffers valid (-c).
func checkPingpong(t *testing.T, side, out string, size int) {
	t.Helper()
	// "200 iters in 0.00 seconds = 5.39 usec/iter"
	iters, ok := lineFields(out, strconv.Itoa(pingpongIters)+" iters in")
	if !ok || len(iters) != 8 {
		t.Errorf("%s: no %q line; it printed:\n%s", side, strconv.Itoa(pingpongIters)+" iters in", out)
	} else if usec := number(t, "usec/iter", iters[6]); usec <= 0 {
		t.Errorf("%s: %g usec/iter, want a positive time; it printed:\n%s", side, usec, out)
	}
	want := strconv.Itoa(2 * pingpongIters * size)
	if _, ok := lineFields(out, want+" bytes in"); !ok {
		t.Errorf("%s: no %q line; it printed:\n%s", side, want+" bytes in", out)
	}
	if strings.Contains(out, "Invalid data") {
		t.Errorf("%s received wrong data (-c):\n%s", side, out)
	}
}
