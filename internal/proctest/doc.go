// Package proctest runs the processes of tests that need real ones — a
// daemon to SIGKILL, a tool that must exit by itself — and reads what they
// print while they run.
//
//	p := proctest.Start(t, exec.Command(bin, "perf", "--loopback", "rc_bw"))
//	p.AwaitOutput(t, "rc_bw", time.Minute)
//	p.Kill()
//	code := p.AwaitExit(t, 30*time.Second)
package proctest
