package proto

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/vrdma/vrdma/switchview"
)

// TestSwitchRecordsWireForm: the switch commands' requests and replies,
// encoded by the daemon and the library before their records moved into
// package switchview (testdata/switch, every field set), decode into the
// types they are sent as now with no field unknown, and encode back to the
// same bytes; so do the records' zero values, which omit what they omitted.
// A daemon and a library of different builds read each other's.
func TestSwitchRecordsWireForm(t *testing.T) {
	zero := func() any {
		return &struct {
			Bound      switchview.BoundPath     `json:"bound"`
			Caps       switchview.VerbsCaps     `json:"caps"`
			Devices    switchview.PathDevices   `json:"devices"`
			Group      switchview.McastGroup    `json:"group"`
			Host       switchview.Host          `json:"host"`
			Hosts      switchview.HostList      `json:"hosts"`
			Mcast      switchview.McastList     `json:"mcast"`
			Path       switchview.Path          `json:"path"`
			PathReq    PathReq                  `json:"pathreq"`
			PortGroup  switchview.PortGroup     `json:"portgroup"`
			PortGroups switchview.PortGroupList `json:"portgroups"`
			Request    switchview.PathRequest   `json:"request"`
			Switch     switchview.Switch        `json:"switch"`
			Uplink     switchview.Uplink        `json:"uplink"`
		}{}
	}
	for _, tt := range []struct {
		file string
		into func() any
	}{
		{"switch.json", func() any { return &switchview.Switch{} }},
		{"hosts.json", func() any { return &switchview.HostList{} }},
		{"portgroups.json", func() any { return &switchview.PortGroupList{} }},
		{"portgroup_add.json", func() any { return &switchview.PortGroup{} }},
		{"path.json", func() any { return &switchview.Path{} }},
		{"path_request.json", func() any { return &PathReq{} }},
		{"mcast.json", func() any { return &switchview.McastList{} }},
		{"zero.json", zero},
	} {
		t.Run(tt.file, func(t *testing.T) {
			golden, err := os.ReadFile(filepath.Join("testdata", "switch", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			golden = bytes.TrimSuffix(golden, []byte("\n"))
			v := tt.into()
			dec := json.NewDecoder(bytes.NewReader(golden))
			dec.DisallowUnknownFields()
			if err := dec.Decode(v); err != nil {
				t.Fatalf("decode %s into %T: %v", tt.file, v, err)
			}
			again, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(again, golden) {
				t.Errorf("%T encodes\n%s\nthe old wire form was\n%s", v, again, golden)
			}
			if tt.file == "zero.json" {
				if fresh, _ := json.Marshal(zero()); !bytes.Equal(fresh, golden) {
					t.Errorf("zero values encode\n%s\nthe old wire form was\n%s", fresh, golden)
				}
			}
		})
	}
}
