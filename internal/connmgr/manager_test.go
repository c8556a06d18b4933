package connmgr_test

import (
	"strings"
	"testing"

	"github.com/vrdma/vrdma/internal/connmgr"
)

// New refuses a config it cannot run, saying what to change.
func TestCMNewConfig(t *testing.T) {
	if _, err := connmgr.New(connmgr.Config{}); err == nil || !strings.Contains(err.Error(), "Config.Host is nil") {
		t.Fatalf("err = %v, want the missing host named", err)
	}
	m, err := connmgr.New(connmgr.Config{Host: newHost(t)})
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
}
