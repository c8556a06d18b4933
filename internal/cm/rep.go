package cm

// REP accepts a request: the responder's side of the connection.
type REP struct {
	LocalID, RemoteID  uint32
	MTU                uint8 // the path MTU both use
	ResponderResources uint8
	InitiatorDepth     uint8 // 0 from an XRC target, which issues none
	QPN                uint32
	PSN                uint32
	GID                [16]byte
	PrivateData        []byte
}

func (m *REP) Type() Type                  { return TypeREP }
func (m *REP) IDs() (local, remote uint32) { return m.LocalID, m.RemoteID }

// RTU is the requester's confirmation of a reply: its QP is ready to use.
type RTU struct {
	LocalID, RemoteID uint32
	PrivateData       []byte
}

func (m *RTU) Type() Type                  { return TypeRTU }
func (m *RTU) IDs() (local, remote uint32) { return m.LocalID, m.RemoteID }
