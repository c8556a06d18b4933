package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// userDefaults sets what `vrdma daemon --user` means for the flags the
// command line left alone: the user's private socket (userdir.go), owner
// only; no switch (whose listeners would take the host's ports);
// nothing persisted.
func userDefaults(fs *flag.FlagSet, sock, state *string, mode *octalFlag, sw *daemonSwitchFlags) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if !set["socket"] {
		dir, err := userDaemonDir()
		if err != nil {
			return err
		}
		*sock = filepath.Join(dir, userSocketName)
	}
	if !set["state-dir"] {
		*state = ""
	}
	if !set["mode"] {
		*mode = 0o600
	}
	if !set["no-switch"] {
		*sw.noSwitch = true
	}
	return nil
}

// detachWait bounds how long --detach waits for the daemon to serve: a
// hang guard, far beyond a start's usual milliseconds.
const detachWait = 30 * time.Second

// startDetached starts the daemon the command line args describe (less
// --detach) in a session of its own, its output appended to sock+".log",
// and returns once it serves sock, or with its log if it ended first.
func startDetached(args []string, sock string, stdout io.Writer) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	logPath := sock + ".log"
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("--detach: the daemon's log: %w", err)
	}
	defer logf.Close()
	var rest []string
	for _, a := range args {
		if a != "--detach" && a != "-detach" && a != "--detach=true" && a != "-detach=true" {
			rest = append(rest, a)
		}
	}
	cmd := exec.Command(self, append([]string{"daemon"}, rest...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// In / (holding no directory of the caller's), in a session of its
	// own (no terminal's signals).
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("--detach: %w", err)
	}
	ended := make(chan struct{})
	go func() { _ = cmd.Wait(); close(ended) }()
	deadline := time.After(detachWait)
	for {
		select {
		case <-ended:
			return fmt.Errorf("the daemon ended as it started: %s", logTail(logPath))
		case <-deadline:
			_ = cmd.Process.Kill()
			return fmt.Errorf("the daemon did not serve %s within %v: %s", sock, detachWait, logTail(logPath))
		case <-time.After(10 * time.Millisecond):
		}
		if daemonAnswers(sock) {
			fmt.Fprintf(stdout, "vrdma daemon serving %s (pid %d, log %s)\n", sock, cmd.Process.Pid, logPath)
			return nil
		}
	}
}

// logTail returns the end of the file at path, for an error message.
func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	b = bytes.TrimSpace(b)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	if len(b) == 0 {
		return "it said nothing"
	}
	return string(b)
}
