package connmgr_test

import (
	"strings"
	"testing"

	"github.com/vrdma/vrdma/internal/proto"
)

// The refusal of a port another session listens on names that session's
// instance only to those who may know it (InstanceFor).
func TestCMPortInUseNamesNoStranger(t *testing.T) {
	m, h := newManager(t, nil)
	holder := newSession(t, h.adapter)
	holder.instance, holder.hidden = "secret-vm", true
	if err := holder.do(func() error {
		_, err := m.Listen(holder, proto.CMListenReq{ID: 1, Port: 18515})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	s := newSession(t, h.adapter)
	err := s.do(func() error {
		_, err := m.Listen(s, proto.CMListenReq{ID: 1, Port: 18515})
		return err
	})
	if proto.CodeOf(err) != proto.CodeBusy || !strings.Contains(err.Error(), "port 18515 is in use: another listener has it") ||
		strings.Contains(err.Error(), "secret-vm") {
		t.Fatalf("err = %v, want the port in use, and no instance named", err)
	}
	err = holder.do(func() error {
		_, err := m.Listen(holder, proto.CMListenReq{ID: 2, Port: 18515})
		return err
	})
	if proto.CodeOf(err) != proto.CodeBusy || !strings.Contains(err.Error(), "instance secret-vm's listener has it") {
		t.Fatalf("err = %v, want the holder told its own instance", err)
	}
}
