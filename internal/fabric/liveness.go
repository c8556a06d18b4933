package fabric

import (
	"bytes"
	"context"
	"fmt"
	"time"
)

// HostEventType says what happened to a host.
type HostEventType int

// Host event types.
const (
	// HostJoined: a host appeared (or a new incarnation of it: another boot
	// or namespace, after a HostGone for the old one).
	HostJoined HostEventType = iota + 1
	// HostUpdated: a live host changed its record (uplinks, addresses).
	HostUpdated
	// HostGone: a host's record has been gone for the grace period, or it
	// came back as another incarnation. Peers' QPs to it go to the error
	// state.
	HostGone
	// HostRemoved: a host's record was deleted just now (HostGone follows
	// after the grace period unless it comes back). For the host itself,
	// to write it again at once.
	HostRemoved
	// HostRefused: a record was written that the watcher does not take
	// (LivenessOptions.Trust refused it, or it sits under another host's
	// name); Err says why. The host keeps the last record taken.
	HostRefused
)

func (t HostEventType) String() string {
	switch t {
	case HostJoined:
		return "joined"
	case HostUpdated:
		return "updated"
	case HostGone:
		return "gone"
	case HostRemoved:
		return "removed"
	case HostRefused:
		return "refused"
	}
	return "unknown"
}

// HostEvent reports a change of one host; Host is its latest record (for
// HostGone and HostRemoved, the last one taken; for HostRefused, the one
// refused, named by its key).
type HostEvent struct {
	Type HostEventType
	Host Host
	Err  error // why a record was refused; set on the last event if the watch failed
}

// DefaultGrace is how long a host's record may be missing before it is
// reported gone (a daemon restarting within it does not disturb its peers).
const DefaultGrace = 3 * time.Second

// LivenessOptions configure WatchHosts.
type LivenessOptions struct {
	// Grace delays HostGone after a host's record disappears (0:
	// DefaultGrace). A record that comes back within it, from the same
	// host incarnation, reports nothing (or HostUpdated if it changed).
	Grace time.Duration
	// Clock runs the grace timers (nil: the wall clock).
	Clock Clock
	// Trust, if set, judges every record, with the lease it was put under,
	// before the watcher takes it, and returns the part to take: a record
	// it refuses is as if it had not been written (the host keeps the last
	// record taken, or has none) and is reported as HostRefused.
	Trust func(h Host, lease LeaseID) (Host, error)
}

// WatchHosts reports the hosts of the switch: HostJoined for each live one
// first, then every change, until ctx ends. A host whose lease ended is
// reported HostGone only once its record has stayed away for the grace
// period. The channel is closed when ctx ends or the watch fails (the last
// event then carries Err).
func (f *Fabric) WatchHosts(ctx context.Context, opts LivenessOptions) (<-chan HostEvent, error) {
	if opts.Grace <= 0 {
		opts.Grace = DefaultGrace
	}
	if opts.Clock == nil {
		opts.Clock = RealClock{}
	}
	kvs, rev, err := f.st.List(ctx, f.keys.hosts())
	if err != nil {
		return nil, err
	}
	w := &hostWatcher{
		opts:    opts,
		out:     make(chan HostEvent, 16),
		live:    map[string]hostState{},
		pending: map[string]*pendingGone{},
		expired: make(chan *pendingGone),
	}
	var initial []HostEvent
	for _, kv := range kvs {
		h, err := w.take(kv)
		if err != nil {
			initial = append(initial, HostEvent{Type: HostRefused, Host: Host{Name: nameOf(kv.Key)}, Err: err})
			continue
		}
		w.live[h.Name] = hostState{h: h, raw: kv.Value}
		initial = append(initial, HostEvent{Type: HostJoined, Host: h})
	}
	wch := f.st.Watch(ctx, f.keys.hosts(), rev+1)
	go w.run(ctx, wch, initial)
	return w.out, nil
}

type hostState struct {
	h   Host
	raw []byte
}

type pendingGone struct {
	name  string
	last  hostState
	timer Timer
}

type hostWatcher struct {
	opts    LivenessOptions
	out     chan HostEvent
	live    map[string]hostState
	pending map[string]*pendingGone
	expired chan *pendingGone
}

func (w *hostWatcher) run(ctx context.Context, wch <-chan WatchResponse, initial []HostEvent) {
	defer close(w.out)
	defer func() {
		for _, p := range w.pending {
			p.timer.Stop()
		}
	}()
	for _, ev := range initial {
		if !w.emit(ctx, ev) {
			return
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case p := <-w.expired:
			if w.pending[p.name] != p {
				continue // the host came back meanwhile
			}
			delete(w.pending, p.name)
			if !w.emit(ctx, HostEvent{Type: HostGone, Host: p.last.h}) {
				return
			}
		case wr, ok := <-wch:
			if !ok {
				return
			}
			if wr.Err != nil {
				w.emit(ctx, HostEvent{Err: wr.Err})
				return
			}
			for _, ev := range wr.Events {
				if !w.handle(ctx, ev) {
					return
				}
			}
		}
	}
}

func (w *hostWatcher) handle(ctx context.Context, ev Event) bool {
	name := nameOf(ev.KV.Key)
	if ev.Type == EventDelete {
		st, ok := w.live[name]
		if !ok {
			return true
		}
		delete(w.live, name)
		p := &pendingGone{name: name, last: st}
		p.timer = w.opts.Clock.AfterFunc(w.opts.Grace, func() {
			select {
			case w.expired <- p:
			case <-ctx.Done():
			}
		})
		w.pending[name] = p
		return w.emit(ctx, HostEvent{Type: HostRemoved, Host: st.h})
	}
	h, err := w.take(ev.KV)
	if err != nil {
		return w.emit(ctx, HostEvent{Type: HostRefused, Host: Host{Name: name}, Err: err})
	}
	cur := hostState{h: h, raw: ev.KV.Value}
	prev, wasLive := w.live[name]
	if p, ok := w.pending[name]; ok {
		// Back within the grace period.
		p.timer.Stop()
		delete(w.pending, name)
		prev, wasLive = p.last, true
	}
	w.live[name] = cur
	switch {
	case !wasLive:
		return w.emit(ctx, HostEvent{Type: HostJoined, Host: h})
	case !prev.h.Identity.SameHost(h.Identity):
		// Another incarnation: everything the old one had is gone.
		return w.emit(ctx, HostEvent{Type: HostGone, Host: prev.h}) &&
			w.emit(ctx, HostEvent{Type: HostJoined, Host: h})
	case !bytes.Equal(prev.raw, cur.raw):
		return w.emit(ctx, HostEvent{Type: HostUpdated, Host: h})
	}
	return true
}

// take decodes a record and judges it: it must be valid JSON, sit under
// its own host's name, and pass Trust if there is one.
func (w *hostWatcher) take(kv KV) (Host, error) {
	h, err := decode[Host]("host", kv)
	if err != nil {
		return Host{}, err
	}
	if key := nameOf(kv.Key); h.Name != key {
		return Host{}, fmt.Errorf("%w: the record at %s is host %q's", ErrInvalid, kv.Key, h.Name)
	}
	if w.opts.Trust != nil {
		return w.opts.Trust(h, kv.Lease)
	}
	return h, nil
}

func (w *hostWatcher) emit(ctx context.Context, ev HostEvent) bool {
	select {
	case w.out <- ev:
		return true
	case <-ctx.Done():
		return false
	}
}
