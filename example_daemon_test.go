package vrdma_test

import (
	"os"
	"path/filepath"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/internal/daemon"
)

// startDaemon runs a host daemon inside this process, on a socket in a new
// temporary directory, with two instances, "server" and "client", of one
// adapter each (as two virtual machines of one host). It returns the
// daemon's socket and a function that stops it. The examples use it so
// that `go test` runs them on any machine; a program on a host where
// `vrdma daemon` runs passes no socket (Options' zero value finds it), and
// `vrdma vm create NAME` makes its instances.
func startDaemon() (sock string, stop func()) {
	dir, err := os.MkdirTemp("", "vrdma-example-")
	if err != nil {
		panic(err)
	}
	d, err := daemon.New(daemon.Config{SocketPath: filepath.Join(dir, "vrdma.sock"), HostName: "example"})
	if err != nil {
		os.RemoveAll(dir)
		panic(err)
	}
	go d.Serve()
	stop = func() {
		d.Close()
		os.RemoveAll(dir)
	}
	adm, err := vrdma.DialAdmin(vrdma.Options{Socket: d.SocketPath()})
	if err != nil {
		stop()
		panic(err)
	}
	defer adm.Close()
	for _, name := range []string{"server", "client"} {
		if _, err := adm.CreateInstance(vrdma.InstanceSpec{Name: name, Adapters: 1}); err != nil {
			stop()
			panic(err)
		}
	}
	return d.SocketPath(), stop
}
