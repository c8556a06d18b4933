package verbs

// The device's asynchronous events (ibv_get_async_event): the helper
// watches the device's async descriptor in its poll loop, acks each event
// and pushes it on the push socket as an OpAsyncEvent message, which the
// push reader parses as untrusted and hands to the event handler. A helper
// that exits (its device is gone, it crashed, it was killed) is reported
// once to the gone handler (docs/design/verbs-uplink-faults.md).

import (
	"fmt"
	"strings"
	"sync"
)

// OpAsyncEvent is pushed, unasked, on the push socket: u32 event type
// (enum ibv_event_type), u32 element (the helper's QP or CQ handle, the
// port number, 0 for the device), u32 QPN (QP events; 0 otherwise).
const OpAsyncEvent Op = 48

// asyncEventSize is an OpAsyncEvent's body.
const asyncEventSize = 12

// Event types (enum ibv_event_type, rdma-core's verbs.h).
const (
	EventCQErr        = 0
	EventQPFatal      = 1
	EventQPReqErr     = 2
	EventQPAccessErr  = 3
	EventCommEst      = 4
	EventSQDrained    = 5
	EventPathMig      = 6
	EventPathMigErr   = 7
	EventDeviceFatal  = 8
	EventPortActive   = 9
	EventPortErr      = 10
	EventLIDChange    = 11
	EventPKeyChange   = 12
	EventSMChange     = 13
	EventSRQErr       = 14
	EventSRQLimit     = 15
	EventQPLastWQE    = 16
	EventClientRereg  = 17
	EventGIDChange    = 18
	EventWQFatal      = 19
	maxEventType      = EventWQFatal
	maxElementHandle  = 1 << 16
	maxEventQPN       = 1<<24 - 1
	eventElementQP    = 1
	eventElementCQ    = 2
	eventElementPort  = 3
	eventElementNone  = 4
	eventElementOther = 5 // SRQ (its handle) or WQ (0)
)

// AsyncEvent is one asynchronous event of the device.
type AsyncEvent struct {
	Type    uint32 // enum ibv_event_type
	Element uint32 // QP or CQ handle, port number, or 0
	QPN     uint32 // the QP's number, for QP events
}

// eventElement says what an event type's element is.
func eventElement(t uint32) int {
	switch t {
	case EventQPFatal, EventQPReqErr, EventQPAccessErr, EventCommEst, EventSQDrained, EventPathMig, EventPathMigErr, EventQPLastWQE:
		return eventElementQP
	case EventCQErr:
		return eventElementCQ
	case EventPortActive, EventPortErr, EventLIDChange, EventPKeyChange, EventSMChange, EventClientRereg, EventGIDChange:
		return eventElementPort
	case EventDeviceFatal:
		return eventElementNone
	}
	return eventElementOther
}

// IsQPEvent reports whether e names a QP (Element, QPN).
func (e AsyncEvent) IsQPEvent() bool { return eventElement(e.Type) == eventElementQP }

// IsCQEvent reports whether e names a CQ (Element).
func (e AsyncEvent) IsCQEvent() bool { return eventElement(e.Type) == eventElementCQ }

// IsPortEvent reports whether e names a port (Element).
func (e AsyncEvent) IsPortEvent() bool { return eventElement(e.Type) == eventElementPort }

// EventName names an event type as rdma-core's ibv_event_type_str does.
func EventName(t uint32) string {
	names := [...]string{"CQ error", "local work queue catastrophic error", "invalid request local work queue error",
		"local access violation work queue error", "communication established", "send queue drained",
		"path migrated", "path migration request error", "local catastrophic error", "port active",
		"port error", "LID change", "P_Key change", "SM change", "SRQ catastrophic error", "SRQ limit reached",
		"last WQE reached", "client reregistration", "GID table change", "WQ fatal"}
	if t < uint32(len(names)) {
		return names[t]
	}
	return fmt.Sprintf("event %d", t)
}

// AppendAsyncEvent appends a pushed OpAsyncEvent message (for tests and
// fakes; the helper builds its own).
func AppendAsyncEvent(dst []byte, e AsyncEvent) []byte {
	dst = AppendHeader(dst, OpAsyncEvent, 0, 0, asyncEventSize)
	dst = ne.AppendUint32(dst, e.Type)
	dst = ne.AppendUint32(dst, e.Element)
	return ne.AppendUint32(dst, e.QPN)
}

// ParseAsyncEvent decodes a pushed OpAsyncEvent message: a known event
// type, an element that fits it (a handle in range for a QP or CQ, a port
// from 1, 0 for the device) and a 24-bit QPN on QP events only.
func ParseAsyncEvent(msg []byte) (AsyncEvent, error) {
	h, err := ParseHeader(msg)
	if err != nil {
		return AsyncEvent{}, err
	}
	body := msg[HeaderSize:]
	if h.Op() != OpAsyncEvent || h.Seq() != 0 || h.Status() != 0 || len(body) != asyncEventSize {
		return AsyncEvent{}, protoErrorf("pushed op %#x, seq %d, status %d, %d-byte body; want an async event of %d bytes", h.Op(), h.Seq(), h.Status(), len(body), asyncEventSize)
	}
	e := AsyncEvent{Type: ne.Uint32(body), Element: ne.Uint32(body[4:]), QPN: ne.Uint32(body[8:])}
	if e.Type > maxEventType {
		return AsyncEvent{}, protoErrorf("async event type %d is none of rdma-core's", e.Type)
	}
	ok := false
	switch eventElement(e.Type) {
	case eventElementQP:
		ok = e.Element < maxElementHandle && e.QPN <= maxEventQPN
	case eventElementCQ, eventElementOther:
		ok = e.Element < maxElementHandle && e.QPN == 0
	case eventElementPort:
		ok = e.Element >= 1 && e.Element <= 255 && e.QPN == 0
	case eventElementNone:
		ok = e.Element == 0 && e.QPN == 0
	}
	if !ok {
		return AsyncEvent{}, protoErrorf("async event %d (%s) with element %d, QPN %#x", e.Type, EventName(e.Type), e.Element, e.QPN)
	}
	return e, nil
}

// faults holds the event and gone handlers of a device.
type faults struct {
	mu    sync.Mutex
	event func(AsyncEvent)
	gone  func(error)
	once  sync.Once
}

// SetEventHandler sets the function that gets the device's asynchronous
// events, in the device's order. It runs on the push reader, as the
// completion handler does, with the same rules: it must not call the
// device. Events come once the push socket exists (the first CQ made with
// push brings it); a device-fatal event before then ends the helper, which
// the gone handler reports.
func (d *Device) SetEventHandler(fn func(AsyncEvent)) {
	d.f.mu.Lock()
	d.f.event = fn
	d.f.mu.Unlock()
}

// SetGoneHandler sets the function called once when the helper has exited
// or been given up on (killed for a protocol error, a timeout, Close), with
// the reason. It runs on a goroutine of its own and may call anything but
// the device.
func (d *Device) SetGoneHandler(fn func(error)) {
	d.f.mu.Lock()
	d.f.gone = fn
	d.f.mu.Unlock()
	if d.h.cmd != nil {
		go func() {
			<-d.h.waited
			d.reportGone()
		}()
	}
}

// reportGone calls the gone handler once, with what made the helper go.
func (d *Device) reportGone() {
	d.f.once.Do(func() {
		d.h.mu.Lock()
		err := d.h.dead
		d.h.mu.Unlock()
		if err == nil {
			msg := "it exited"
			if d.h.cmd != nil && d.h.cmd.ProcessState != nil {
				msg = "it exited (" + d.h.cmd.ProcessState.String() + ")"
			}
			if d.h.stderr != nil {
				if out := strings.TrimSpace(d.h.stderr.String()); out != "" {
					msg += ", saying: " + printable([]byte(out))
				}
			}
			err = &Error{Kind: ErrHelperGone, Msg: msg}
		}
		d.f.mu.Lock()
		fn := d.f.gone
		d.f.mu.Unlock()
		if fn != nil {
			fn(err)
		}
	})
}

// handleEvent hands a pushed event to the event handler.
func (d *Device) handleEvent(e AsyncEvent) {
	d.f.mu.Lock()
	fn := d.f.event
	d.f.mu.Unlock()
	if fn != nil {
		fn(e)
	}
}

// PID returns the helper's process id, 0 if it has none (tests kill it).
func (d *Device) PID() int {
	if d.h.cmd == nil || d.h.cmd.Process == nil {
		return 0
	}
	return d.h.cmd.Process.Pid
}
