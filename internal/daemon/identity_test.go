package daemon_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/ibv"
	"github.com/vrdma/vrdma/internal/daemon"
	"github.com/vrdma/vrdma/internal/daemontest"
)

// address is what a program tells its peer of its end of a connection:
// ibv_rc_pingpong prints and exchanges exactly these.
type address struct {
	guid uint64
	gid  vrdma.GID
	lid  uint16
	qpn  uint32
}

// firstAddress opens vrdma0 of the daemon at sock and returns the address
// of the first QP made there.
func firstAddress(t *testing.T, sock string) address {
	t.Helper()
	dev, err := vrdma.Open("vrdma0", vrdma.Options{Socket: sock})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	port, err := dev.QueryPort(1)
	if err != nil {
		t.Fatal(err)
	}
	gid, err := dev.GID(0)
	if err != nil {
		t.Fatal(err)
	}
	pd, err := dev.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := dev.CreateCQ(4)
	if err != nil {
		t.Fatal(err)
	}
	qp, err := pd.CreateQP(vrdma.QPInitAttr{Type: ibv.RC, SendCQ: cq, RecvCQ: cq, Cap: vrdma.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	return address{guid: dev.Info().GUID, gid: gid, lid: port.LID, qpn: qp.QPN()}
}

// TestDistinctDaemonsShareNoAddress: two daemons with DistinctIdentity on
// one host (two users' daemons that vrdma run started) give their first
// adapter and first QP a GUID, GID, LID and QPN that differ in each: a
// program handed the other daemon's address cannot find its own adapter
// or QP there. Ordinary daemons keep their stable addresses (LID 1).
func TestDistinctDaemonsShareNoAddress(t *testing.T) {
	distinct := func(c *daemon.Config) { c.DistinctIdentity = true; c.HostName = "same-host" }
	a := firstAddress(t, daemontest.StartWith(t, distinct).SocketPath())
	b := firstAddress(t, daemontest.StartWith(t, distinct).SocketPath())
	if a.guid == b.guid || a.gid == b.gid || a.lid == b.lid || a.qpn == b.qpn {
		t.Errorf("two distinct daemons share an address: %+v and %+v (want GUID, GID, LID and QPN all different)", a, b)
	}
	if a.lid == 0 || b.lid == 0 {
		t.Errorf("LIDs %d and %d: want a LID on each port", a.lid, b.lid)
	}
	plain := firstAddress(t, daemontest.Start(t))
	if plain.lid != 1 {
		t.Errorf("an ordinary daemon's first LID is %d, want 1 as before", plain.lid)
	}
}

// TestIdleExit: a daemon with IdleExit serves as long as a client is
// connected, and closes once none has been for that long.
func TestIdleExit(t *testing.T) {
	dir, err := os.MkdirTemp("", "vrdma-idle-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	const idle = 200 * time.Millisecond
	d, err := daemon.New(daemon.Config{SocketPath: filepath.Join(dir, "s.sock"), HostName: "test", IdleExit: idle})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	served := make(chan error, 1)
	go func() { served <- d.Serve() }()
	dev, err := vrdma.Open("vrdma0", vrdma.Options{Socket: d.SocketPath()})
	if err != nil {
		t.Fatal(err)
	}
	// Ten idle periods with a client: the daemon must still serve it.
	time.Sleep(10 * idle)
	if _, err := dev.Query(); err != nil {
		t.Fatalf("the daemon stopped under a connected client: %v", err)
	}
	dev.Close()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve returned %v, want nil once idle", err)
		}
	case <-time.After(30 * time.Second): // a hang guard, not a bound
		t.Fatal("the daemon still serves 30 s after its last client left")
	}
	if _, err := os.Stat(d.SocketPath()); !os.IsNotExist(err) {
		t.Errorf("the idle daemon's socket is still there: %v", err)
	}
}
