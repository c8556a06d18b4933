package daemon

import "time"

// firstUseWait is the least a daemon with Config.IdleExit waits for its
// first client.
const firstUseWait = 30 * time.Second

// watchIdle closes the daemon once no session has been open for idle
// (Config.IdleExit): a user's daemon that vrdma run started ends when its
// programs have. It looks every idle/10; a session that starts and ends
// between two looks goes unseen, which only shortens the wait. The close
// happens under the lock admitSession takes, so a client either gets a
// session that the close does not end, or is refused and can start
// another daemon.
func (d *Daemon) watchIdle(idle time.Duration) {
	tick := time.NewTicker(max(idle/10, 10*time.Millisecond))
	defer tick.Stop()
	// Until its first session, the daemon waits at least firstUseWait:
	// whoever started it connects once it serves, which on a loaded
	// machine may take longer than idle.
	busy := time.Now().Add(max(firstUseWait-idle, 0))
	for now := range tick.C {
		closed, _ := d.closeIf(func() bool {
			if len(d.sessions) > 0 {
				busy = now
			}
			return now.Sub(busy) >= idle
		})
		if closed {
			d.log.Info("no client for a while: the daemon stops", "idle", idle)
			return
		}
		if d.isClosed() {
			return
		}
	}
}
