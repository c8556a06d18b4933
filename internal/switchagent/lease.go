package switchagent

import (
	"context"
	"time"

	"github.com/vrdma/vrdma/internal/fabric"
)

// The daemon's lease on the switch. If etcd is out of reach for longer
// than the lease's TTL (or someone revokes it), the host record and the
// subnet-manager candidacy go with it, and the other hosts see this one
// leave. keepLease then takes a new lease, registers the host again and
// stands again, retrying with a backoff until etcd answers.

// candidacy returns the current subnet-manager candidacy (nil while none).
func (a *Agent) candidacy() *fabric.Candidacy {
	a.regMu.Lock()
	defer a.regMu.Unlock()
	return a.cand
}

// keepLease renews the membership whenever the lease ends, until Close.
func (a *Agent) keepLease() {
	defer a.wg.Done()
	for {
		a.regMu.Lock()
		done := a.sess.Done()
		a.regMu.Unlock()
		select {
		case <-a.ctx.Done():
			return
		case <-done:
		}
		if a.ctx.Err() != nil {
			return
		}
		if a.closing.Load() {
			return
		}
		a.leaseLost.Add(1)
		a.log.Warn("switch: this host's lease ended (was etcd out of reach for longer than its TTL?): registering again", "ttl", a.cfg.HostTTL)
		backoff := 100 * time.Millisecond
		for {
			err := a.renew()
			if err == nil {
				a.log.Info("switch: registered again")
				break
			}
			a.log.Warn("switch: registering again failed; retrying", "err", err, "in", backoff)
			select {
			case <-a.ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 5*time.Second)
		}
	}
}

// renew takes a new lease, puts the host record under it and stands for
// the subnet manager again.
func (a *Agent) renew() error {
	ctx, cancel := context.WithTimeout(a.ctx, 10*time.Second)
	defer cancel()
	sess, err := a.store.NewSession(ctx, a.cfg.HostTTL)
	if err != nil {
		return err
	}
	a.regMu.Lock()
	h, err := a.signedRecord(sess.Lease())
	if err == nil {
		err = a.fab.RegisterHostTrusting(ctx, h, sess, a.recordTrust())
	}
	if err != nil {
		a.regMu.Unlock()
		_ = sess.Close()
		return err
	}
	a.written = h
	old := a.cand
	a.sess, a.cand = sess, nil
	a.regMu.Unlock()
	a.McastChanged() // the old lease took the group records: write them again
	if old != nil {
		_ = old.Close()
	}
	cand, err := a.fab.Campaign(a.ctx, sess, a.hostName, a.cfg.SMPriority, fabric.SMConfig{})
	if err != nil {
		// The host is back; the next lease loss or restart stands again.
		a.log.Warn("switch: could not stand for the subnet manager again", "err", err)
		return nil
	}
	a.regMu.Lock()
	a.cand = cand
	a.regMu.Unlock()
	return nil
}

// keepCandidacy stands again if the candidacy ends while the lease lives
// (its watch failed for good, say): a daemon never silently stops
// standing for the subnet manager.
func (a *Agent) keepCandidacy() {
	defer a.wg.Done()
	for {
		a.regMu.Lock()
		cand, sess := a.cand, a.sess
		a.regMu.Unlock()
		// A candidacy ends by itself or by renew's Close (which replaces
		// it): either closes Done, so only the want of one needs a timer.
		var done <-chan struct{}
		var look <-chan time.Time
		if cand != nil {
			done = cand.Done()
		} else {
			look = time.After(time.Second) // no candidacy: look again
		}
		select {
		case <-a.ctx.Done():
			return
		case <-done:
		case <-look:
		}
		a.candLooks.Add(1)
		select {
		case <-sess.Done():
			continue // keepLease renews the lease, and stands again
		case <-a.ctx.Done():
			return
		default:
		}
		if a.closing.Load() {
			return
		}
		a.regMu.Lock()
		current := a.cand == cand && a.sess == sess
		a.regMu.Unlock()
		if !current {
			continue // renew replaced it
		}
		if cand != nil {
			a.log.Warn("switch: the subnet-manager candidacy ended; standing again", "err", cand.Err())
		}
		next, err := a.fab.Campaign(a.ctx, sess, a.hostName, a.cfg.SMPriority, fabric.SMConfig{})
		if err != nil {
			a.log.Warn("switch: could not stand for the subnet manager; retrying", "err", err)
			select {
			case <-a.ctx.Done():
				return
			case <-time.After(time.Second):
			}
			continue
		}
		a.regMu.Lock()
		if a.sess == sess && a.cand == cand {
			a.cand, next = next, nil
		}
		a.regMu.Unlock()
		if next != nil {
			_ = next.Close() // renew got there first
		}
	}
}
