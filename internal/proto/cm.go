package proto

// Connection manager commands (OpCMListen ... OpCMDisconnect) and events
// (OpCMEvent). Every command answers at once: what it starts (a request to
// another host, a disconnection) ends with an event, so a session is never
// blocked behind a peer that is slow to answer.
//
// Connections and listeners carry ids. The library picks the ids of its
// listeners and of the connections it dials (below CMDaemonIDBase), so an
// event can never arrive before the library knows the id; the daemon picks
// the ids of the requests it hands to a listener (CMDaemonIDBase and up).

// CMDaemonIDBase is where the ids the daemon picks start.
const CMDaemonIDBase = 1 << 31

// CMListenReq starts listening on Port (0: the daemon picks a free one)
// of the host-wide port space, on the session's device.
type CMListenReq struct {
	ID      uint32 `json:"id"`
	Port    uint16 `json:"port"`
	Backlog int    `json:"backlog,omitempty"` // requests waiting for an answer; 0: the default
	// UD: the listener's id is of rdma_cm's UDP port space (SIDR). The
	// daemon's own CM serves both on one listener; a device's CM (a
	// verbs uplink) has an id per port space, as the kernel's rdma_cm.
	UD bool `json:"ud,omitempty"`
}

// CMListenResp says which port the listener got.
type CMListenResp struct {
	Port uint16 `json:"port"`
}

// CMCancelListenReq stops listener ID; its requests not answered yet are
// rejected.
type CMCancelListenReq struct {
	ID uint32 `json:"id"`
}

// CMConnectReq asks the listener on Port of the host whose adapter has
// address Addr (a GID) to connect QP (in RESET) with this side's PSN.
type CMConnectReq struct {
	ID          uint32 `json:"id"`
	QP          uint32 `json:"qp"`
	PSN         uint32 `json:"psn"`
	Addr        []byte `json:"addr"` // 16 bytes; IPv4 as ::ffff:a.b.c.d
	Port        uint16 `json:"port"`
	PrivateData []byte `json:"private_data,omitempty"`
	TimeoutMs   uint32 `json:"timeout_ms,omitempty"` // how long to wait for the reply; 0: the daemon's default
	RdAtomic    uint8  `json:"rd_atomic"`            // RDMA READs and atomics in flight each way, at most
	// KeepQP: when the peer ends the connection, the daemon leaves QP as
	// it is (the event says so); the library moves it to ERR when its
	// application disconnects, as rdma_cm does. False: the daemon moves
	// it to ERR with the event.
	KeepQP bool `json:"keep_qp,omitempty"`
}

// CMConnectResp says which local address and port the request came from.
type CMConnectResp struct {
	LocalAddr []byte `json:"local_addr"`
	LocalPort uint16 `json:"local_port"`
	SGIDIndex uint8  `json:"sgid_index"`
}

// CMAcceptReq answers: on a request's connection (the listener side), the
// reply with QP (connected already) and PSN; on a dialled connection that
// got its reply, the confirmation (RTU) that QP is ready.
type CMAcceptReq struct {
	ID          uint32 `json:"id"`
	QP          uint32 `json:"qp"`
	PSN         uint32 `json:"psn,omitempty"`
	PrivateData []byte `json:"private_data,omitempty"`
	RdAtomic    uint8  `json:"rd_atomic,omitempty"`
	KeepQP      bool   `json:"keep_qp,omitempty"` // as CMConnectReq's, for the listener's side
}

// CMRejectReq refuses a request, or abandons a connection being set up
// (Reason 0: rejected by the application).
type CMRejectReq struct {
	ID          uint32 `json:"id"`
	Reason      uint16 `json:"reason,omitempty"`
	Text        string `json:"text,omitempty"`
	PrivateData []byte `json:"private_data,omitempty"`
}

// CMDisconnectReq ends an established connection: its QP goes to the
// error state and the peer is told.
type CMDisconnectReq struct {
	ID          uint32 `json:"id"`
	PrivateData []byte `json:"private_data,omitempty"`
}

// CMEventType says what a CMEvent reports.
type CMEventType uint8

const (
	CMEventRequest        CMEventType = iota + 1 // a request to a listener (ID is new)
	CMEventReply                                 // a dialled connection's reply: connect the QP, then accept
	CMEventEstablished                           // the requester confirmed the reply
	CMEventRejected                              // refused, by the peer or by this daemon (Reason, Text)
	CMEventTimeout                               // no answer in time; the connection is gone
	CMEventUnreachable                           // the peer's connection manager could not be reached
	CMEventDisconnected                          // the peer ended the connection; the QP is in ERR (unless KeepQP)
	CMEventDisconnectDone                        // the peer answered this side's disconnection (or did not in time)
)

// CMEvent is a connection manager event for connection (or request) ID.
type CMEvent struct {
	Type     CMEventType `json:"type"`
	ID       uint32      `json:"id"`
	Listener uint32      `json:"listener,omitempty"` // Request: the listener's id

	// Request and Reply: the peer's QP, and what this side must use.
	QPType     uint8  `json:"qp_type,omitempty"`
	GID        []byte `json:"gid,omitempty"` // the peer's
	QPN        uint32 `json:"qpn,omitempty"`
	PSN        uint32 `json:"psn,omitempty"`
	MTU        uint8  `json:"mtu,omitempty"`       // the path MTU both sides use
	RdAtomic   uint8  `json:"rd_atomic,omitempty"` // the peer's limit (Request) or the agreed one (Reply)
	SGIDIndex  uint8  `json:"sgid_index,omitempty"`
	LocalAddr  []byte `json:"local_addr,omitempty"`
	LocalPort  uint16 `json:"local_port,omitempty"`
	RemoteAddr []byte `json:"remote_addr,omitempty"`
	RemotePort uint16 `json:"remote_port,omitempty"`
	// Established of a UD QP's dial (SIDR): the listener's Q_Key, with its
	// QPN and GID above.
	QKey uint32 `json:"qkey,omitempty"`

	// Rejected, Timeout, Unreachable: why.
	Reason uint16 `json:"reason,omitempty"`
	Text   string `json:"text,omitempty"`

	PrivateData []byte `json:"private_data,omitempty"`

	// Request and Reply through a device's own CM (a verbs uplink): the
	// PSN this side's QP expects first (its rq_psn), the kernel's, in
	// place of the one the library chose; PSN above is the one it sends
	// from.
	LocalPSN *uint32 `json:"local_psn,omitempty"`
}

// CMResolveReq asks how the session's adapter reaches Addr (a GID; IPv4
// as ::ffff:a.b.c.d): rdma_resolve_addr and rdma_resolve_route.
type CMResolveReq struct {
	Addr []byte `json:"addr"`
}

// CMResolveResp says which of the adapter's addresses a connection to the
// requested one leaves from, at which GID index, over which port MTU, and
// whether the address is an adapter of this host (the connection then
// stays in the daemon).
type CMResolveResp struct {
	LocalAddr []byte `json:"local_addr"`
	SGIDIndex uint8  `json:"sgid_index"`
	MTU       uint8  `json:"mtu"`
	Local     bool   `json:"local,omitempty"`
}
