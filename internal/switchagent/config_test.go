package switchagent

import (
	"testing"

	"github.com/vrdma/vrdma/internal/fabric"
)

// TestSingleHost: a switch can have no other host only when its etcd is
// embedded, alone, and serves clients on its socket or on loopback.
func TestSingleHost(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want bool
	}{
		{"embedded, on its socket (the default)", Config{}, true},
		{"embedded, on a unix socket given", Config{Embed: fabric.EmbedOptions{ClientURL: "unix:///run/vrdma/etcd.sock"}}, true},
		{"embedded, on loopback", Config{Embed: fabric.EmbedOptions{ClientURL: "https://127.0.0.1:2379"}}, true},
		{"embedded, on an address others reach", Config{Embed: fabric.EmbedOptions{ClientURL: "https://192.0.2.1:2379"}}, false},
		{"embedded, by a name", Config{Embed: fabric.EmbedOptions{ClientURL: "https://etcd.example:2379"}}, false},
		{"embedded, in a cluster", Config{Embed: fabric.EmbedOptions{InitialCluster: "a=https://192.0.2.1:2380,b=https://192.0.2.2:2380"}}, false},
		{"another cluster's", Config{Endpoints: []string{"https://192.0.2.1:2379"}}, false},
	}
	for _, tt := range tests {
		if got := tt.cfg.SingleHost(); got != tt.want {
			t.Errorf("%s: SingleHost = %v, want %v", tt.name, got, tt.want)
		}
	}
}
