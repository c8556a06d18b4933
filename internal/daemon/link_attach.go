package daemon

import "github.com/vrdma/vrdma/internal/engine"

// AttachLink attaches an open link to the daemon's host and serves its
// packets until it is closed. `vrdma link add` opens real ones; tests
// attach in-process links (package fakelink).
func (d *Daemon) AttachLink(l engine.Link) error { return attachLink(d.host, l) }

// attachLink attaches l to h and serves its packets until it is closed.
func attachLink(h *engine.Host, l engine.Link) error {
	if err := h.AddLink(l); err != nil {
		return err
	}
	go func() { _ = l.Serve(func(frame []byte) { h.Deliver(l, frame) }) }()
	return nil
}

// Host returns the daemon's engine host.
func (d *Daemon) Host() *engine.Host { return d.host }
