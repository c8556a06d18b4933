package daemon

import "time"

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
	busy := time.Now()
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
