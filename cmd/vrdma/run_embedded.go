package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/internal/daemon"
)

// defaultSocket is where vrdma run looks for a daemon when told of none.
// Tests point it elsewhere.
var defaultSocket = vrdma.DefaultSocket

// daemonAnswers reports whether something accepts connections at the
// daemon socket path.
func daemonAnswers(path string) bool {
	c, err := net.DialTimeout("unixpacket", path, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// exitStatus is a command's exit status that vrdma passes on as its own.
type exitStatus int

func (e exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// runOnEmbeddedDaemon runs the program as a child of vrdma, which serves it
// a daemon of its own (no switch, nothing persisted) until it ends, and
// ends as the program did: with its exit status, or by its signal.
func runOnEmbeddedDaemon(path string, argv []string, libDir string, o vrdma.Options, stderr io.Writer) error {
	dir, err := os.MkdirTemp("", "vrdma-run-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	d, err := daemon.New(daemon.Config{SocketPath: filepath.Join(dir, "vrdma.sock"), StateDir: ""})
	if err != nil {
		return fmt.Errorf("no daemon answers at %s, and one of vrdma run's own did not start: %w", defaultSocket, err)
	}
	go d.Serve()
	defer d.Close()
	fmt.Fprintf(stderr, "vrdma run: no daemon answers at %s: %s runs on a daemon embedded in vrdma, for as long as it runs (start `vrdma daemon` to share adapters between programs)\n",
		defaultSocket, filepath.Base(path))
	o.Socket = d.SocketPath()
	vars, err := guestVars(libDir, os.Getenv("LD_LIBRARY_PATH"), o)
	if err != nil {
		return err
	}
	cmd := exec.Command(path, argv[1:]...)
	cmd.Args[0] = argv[0]
	cmd.Env = withVars(os.Environ(), vars)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("cannot run %s: %w", path, err)
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-sigs:
				_ = cmd.Process.Signal(s)
			case <-done:
				return
			}
		}
	}()
	err = cmd.Wait()
	close(done)
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		return err
	}
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		// End by the same signal, as the program did.
		d.Close()
		os.RemoveAll(dir)
		dieBy(ws.Signal())
		return exitStatus(128 + int(ws.Signal())) // as a shell says it, should the signal not end vrdma
	}
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		return exitStatus(code)
	}
	return nil
}
