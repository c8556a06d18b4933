package fabric

import (
	"testing"
	"time"
)

// startEtcd runs a real single-node etcd for one test, in a temporary
// directory, and returns a Store on it.
func startEtcd(t *testing.T) (*Embedded, *EtcdStore) {
	t.Helper()
	m, err := StartEmbedded(t.TempDir(), EmbedOptions{UnsafeNoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	st := dialT(t, m.Endpoints())
	return m, st
}

func dialT(t *testing.T, endpoints []string) *EtcdStore {
	t.Helper()
	st, err := Dial(endpoints, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func TestEtcdStore(t *testing.T) {
	runStoreSuite(t, func(t *testing.T) storeEnv {
		m, st := startEtcd(t)
		return storeEnv{
			st:      st,
			other:   func(t *testing.T) Store { return dialT(t, m.Endpoints()) },
			advance: func(time.Duration) {},
			clock:   RealClock{},
		}
	})
}

func TestEmbeddedRestart(t *testing.T) {
	dir := t.TempDir()
	var rev int64
	for i := 0; i < 2; i++ {
		m, err := StartEmbedded(dir, EmbedOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("embedded etcd start %d (%s data dir): %v", i, map[bool]string{true: "new", false: "existing"}[i == 0], m.StartTime.Round(time.Millisecond))
		st, err := m.Dial()
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			rev = mustPut(t, st, "/keep", "me", NoLease)
		} else if kv, err := st.Get(ctxT(t), "/keep"); err != nil || kv.ModRev != rev {
			t.Fatalf("after restart: %+v, %v", kv, err)
		}
		st.Close()
		m.Close()
	}
}

func TestDialErrors(t *testing.T) {
	if _, err := Dial(nil, nil); err == nil {
		t.Fatal("Dial with no endpoints succeeded")
	}
	url, err := FreeLoopbackURL()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Dial([]string{url}, nil); err == nil {
		t.Fatalf("Dial to %s where nothing listens succeeded", url)
	}
}
