package daemon

// CMQueued returns the most connection manager events any session of d
// has waiting to be delivered, for the tests of package daemon_test.
func (d *Daemon) CMQueued() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	most := 0
	for s := range d.sessions {
		s.cmOut.mu.Lock()
		most = max(most, len(s.cmOut.q))
		s.cmOut.mu.Unlock()
	}
	return most
}

// CMLagEvents is how many waiting events make a session lagging.
const CMLagEvents = cmLagEvents
