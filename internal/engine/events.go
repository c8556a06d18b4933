package engine

import "github.com/vrdma/vrdma/internal/abi"

// EventSink receives the asynchronous events of the objects of one client
// connection. Event must not block.
type EventSink interface {
	Event(t abi.EventType, handle uint32, qpn uint32, reason string)
}
