package daemon

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
func (sw *swState) candidacy() *fabric.Candidacy {
	sw.regMu.Lock()
	defer sw.regMu.Unlock()
	return sw.cand
}

// keepLease renews the membership whenever the lease ends, until Close.
func (sw *swState) keepLease() {
	defer sw.wg.Done()
	for {
		sw.regMu.Lock()
		done := sw.sess.Done()
		sw.regMu.Unlock()
		select {
		case <-sw.ctx.Done():
			return
		case <-done:
		}
		if sw.ctx.Err() != nil {
			return
		}
		if sw.closing.Load() {
			return
		}
		sw.leaseLost.Add(1)
		sw.d.log.Warn("switch: this host's lease ended (was etcd out of reach for longer than its TTL?): registering again", "ttl", sw.cfg.HostTTL)
		backoff := 100 * time.Millisecond
		for {
			err := sw.renew()
			if err == nil {
				sw.d.log.Info("switch: registered again")
				break
			}
			sw.d.log.Warn("switch: registering again failed; retrying", "err", err, "in", backoff)
			select {
			case <-sw.ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 5*time.Second)
		}
	}
}

// renew takes a new lease, puts the host record under it and stands for
// the subnet manager again.
func (sw *swState) renew() error {
	ctx, cancel := context.WithTimeout(sw.ctx, 10*time.Second)
	defer cancel()
	sess, err := sw.store.NewSession(ctx, sw.cfg.HostTTL)
	if err != nil {
		return err
	}
	sw.regMu.Lock()
	if err := sw.fab.RegisterHost(ctx, sw.hostRecord(), sess); err != nil {
		sw.regMu.Unlock()
		_ = sess.Close()
		return err
	}
	old := sw.cand
	sw.sess, sw.cand = sess, nil
	sw.regMu.Unlock()
	if old != nil {
		_ = old.Close()
	}
	cand, err := sw.fab.Campaign(sw.ctx, sess, sw.d.cfg.HostName, sw.cfg.SMPriority, fabric.SMConfig{})
	if err != nil {
		// The host is back; the next lease loss or restart stands again.
		sw.d.log.Warn("switch: could not stand for the subnet manager again", "err", err)
		return nil
	}
	sw.regMu.Lock()
	sw.cand = cand
	sw.regMu.Unlock()
	return nil
}

// keepCandidacy stands again if the candidacy ends while the lease lives
// (its watch failed for good, say): a daemon never silently stops
// standing for the subnet manager.
func (sw *swState) keepCandidacy() {
	defer sw.wg.Done()
	for {
		sw.regMu.Lock()
		cand, sess := sw.cand, sw.sess
		sw.regMu.Unlock()
		var done <-chan struct{}
		if cand != nil {
			done = cand.Done()
		}
		select {
		case <-sw.ctx.Done():
			return
		case <-done:
		case <-time.After(time.Second): // no candidacy: look again
			if cand != nil {
				continue
			}
		}
		select {
		case <-sess.Done():
			continue // keepLease renews the lease, and stands again
		case <-sw.ctx.Done():
			return
		default:
		}
		if sw.closing.Load() {
			return
		}
		sw.regMu.Lock()
		current := sw.cand == cand && sw.sess == sess
		sw.regMu.Unlock()
		if !current {
			continue // renew replaced it
		}
		if cand != nil {
			sw.d.log.Warn("switch: the subnet-manager candidacy ended; standing again", "err", cand.Err())
		}
		next, err := sw.fab.Campaign(sw.ctx, sess, sw.d.cfg.HostName, sw.cfg.SMPriority, fabric.SMConfig{})
		if err != nil {
			sw.d.log.Warn("switch: could not stand for the subnet manager; retrying", "err", err)
			select {
			case <-sw.ctx.Done():
				return
			case <-time.After(time.Second):
			}
			continue
		}
		sw.regMu.Lock()
		if sw.sess == sess && sw.cand == cand {
			sw.cand, next = next, nil
		}
		sw.regMu.Unlock()
		if next != nil {
			_ = next.Close() // renew got there first
		}
	}
}
