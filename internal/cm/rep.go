package cm

// REP accepts a request: the responder's side of the connection.
//
//	 0 local id u32   4 remote id u32 (the requester's)
//	 8 MTU u8 (the path MTU both use)   9 responder resources u8   10 initiator depth u8   11 zero u8
//	12 QPN u32 (24 bits)   16 starting PSN u32 (24 bits)   20 GID [16]
//	36 private data length u8 (≤ 196)   37 private data
type REP struct {
	LocalID, RemoteID  uint32
	MTU                uint8
	ResponderResources uint8
	InitiatorDepth     uint8
	QPN                uint32
	PSN                uint32
	GID                [16]byte
	PrivateData        []byte
}

func (m *REP) Type() Type                  { return TypeREP }
func (m *REP) IDs() (local, remote uint32) { return m.LocalID, m.RemoteID }

// Append appends m as a frame.
func (m *REP) Append(b []byte) ([]byte, error) {
	w := newWriter(b, TypeREP)
	w.ids(m.LocalID, m.RemoteID)
	if err := checkMTU(TypeREP, m.MTU); err != nil && w.err == nil {
		w.err = err
	}
	w.u8(m.MTU)
	w.u8(m.ResponderResources)
	w.u8(m.InitiatorDepth)
	w.u8(0)
	w.u24(m.QPN, "QPN")
	w.u24(m.PSN, "PSN")
	w.gid(m.GID)
	w.privateData(m.PrivateData)
	return w.finish(b)
}

func parseREP(b []byte) (*REP, error) {
	r := &reader{t: TypeREP, b: b}
	m := &REP{}
	m.LocalID, m.RemoteID = r.ids()
	m.MTU = r.u8("the MTU")
	m.ResponderResources = r.u8("the responder resources")
	m.InitiatorDepth = r.u8("the initiator depth")
	if z := r.u8("the reserved byte"); z != 0 && r.err == nil {
		r.err = badField(TypeREP, "reserved byte %d: must be 0", z)
	}
	m.QPN = r.u24("QPN")
	m.PSN = r.u24("PSN")
	m.GID = r.gid("the GID")
	m.PrivateData = r.privateData()
	r.checkIDs(m.LocalID, m.RemoteID)
	if err := r.done(); err != nil {
		return nil, err
	}
	if err := checkMTU(TypeREP, m.MTU); err != nil {
		return nil, err
	}
	return m, nil
}

// RTU is the requester's confirmation of a reply: its QP is ready to use.
//
//	0 local id u32   4 remote id u32   8 private data length u8 (≤ 224)   9 private data
type RTU struct {
	LocalID, RemoteID uint32
	PrivateData       []byte
}

func (m *RTU) Type() Type                  { return TypeRTU }
func (m *RTU) IDs() (local, remote uint32) { return m.LocalID, m.RemoteID }

// Append appends m as a frame.
func (m *RTU) Append(b []byte) ([]byte, error) {
	return appendIDsAndData(b, TypeRTU, m.LocalID, m.RemoteID, m.PrivateData)
}

func parseRTU(b []byte) (*RTU, error) {
	local, remote, data, err := parseIDsAndData(TypeRTU, b)
	if err != nil {
		return nil, err
	}
	return &RTU{LocalID: local, RemoteID: remote, PrivateData: data}, nil
}

// appendIDsAndData appends a frame whose body is two ids and private data.
func appendIDsAndData(b []byte, t Type, local, remote uint32, data []byte) ([]byte, error) {
	w := newWriter(b, t)
	w.ids(local, remote)
	w.privateData(data)
	return w.finish(b)
}

func parseIDsAndData(t Type, b []byte) (local, remote uint32, data []byte, err error) {
	r := &reader{t: t, b: b}
	local, remote = r.ids()
	data = r.privateData()
	r.checkIDs(local, remote)
	if err := r.done(); err != nil {
		return 0, 0, nil, err
	}
	return local, remote, data, nil
}
