package cm

import "fmt"

// Reason is why a connection was rejected: the IBTA CM reject reason codes
// (IBTA vol. 1, table 112; Linux's enum ib_cm_rej_reason), of which the
// connection manager uses the ones below.
type Reason uint16

const (
	RejectNoQP                 Reason = 1  // the QP could not be connected
	RejectNoResources          Reason = 3  // a limit was reached (a listener's backlog, say)
	RejectTimeout              Reason = 4  // the other side did not answer in time
	RejectUnsupported          Reason = 5  // a request the responder cannot serve
	RejectInvalidCommID        Reason = 6  // the connection id is unknown: it timed out or was cancelled
	RejectInvalidServiceID     Reason = 8  // nobody listens on the port
	RejectInvalidTransportType Reason = 9  // the QP type cannot be connected (UD needs no connection)
	RejectStaleConn            Reason = 10 // the connection is already established
	RejectInvalidGID           Reason = 12 // the destination address is not an adapter of that host
	RejectInvalidMTU           Reason = 26 // no path MTU both sides support
	RejectConsumer             Reason = 28 // the application rejected the request
	RejectInvalidClassVersion  Reason = 31 // the peer speaks another protocol version
)

var reasonNames = map[Reason]string{
	RejectNoQP: "no QP", RejectNoResources: "no resources", RejectTimeout: "timeout",
	RejectUnsupported: "unsupported request", RejectInvalidCommID: "invalid connection id",
	RejectInvalidServiceID: "no listener", RejectInvalidTransportType: "invalid transport type",
	RejectStaleConn: "stale connection", RejectInvalidGID: "invalid GID", RejectInvalidMTU: "invalid MTU",
	RejectConsumer: "rejected by the application", RejectInvalidClassVersion: "invalid class version",
}

func (r Reason) String() string {
	if s, ok := reasonNames[r]; ok {
		return s
	}
	return fmt.Sprintf("reason %d", uint16(r))
}
