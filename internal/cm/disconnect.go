package cm

// DREQ asks to end an established connection.
//
//	0 local id u32   4 remote id u32   8 private data length u8 (≤ 220)   9 private data
type DREQ struct {
	LocalID, RemoteID uint32
	PrivateData       []byte
}

func (m *DREQ) Type() Type                  { return TypeDREQ }
func (m *DREQ) IDs() (local, remote uint32) { return m.LocalID, m.RemoteID }

// Append appends m as a frame.
func (m *DREQ) Append(b []byte) ([]byte, error) {
	return appendIDsAndData(b, TypeDREQ, m.LocalID, m.RemoteID, m.PrivateData)
}

func parseDREQ(b []byte) (*DREQ, error) {
	local, remote, data, err := parseIDsAndData(TypeDREQ, b)
	if err != nil {
		return nil, err
	}
	return &DREQ{LocalID: local, RemoteID: remote, PrivateData: data}, nil
}

// DREP answers a DREQ: the connection is over on both sides. It is sent
// for a connection the receiver no longer knows too, so that a DREQ whose
// answer was lost still ends.
//
//	0 local id u32   4 remote id u32   8 private data length u8 (≤ 220)   9 private data
type DREP struct {
	LocalID, RemoteID uint32
	PrivateData       []byte
}

func (m *DREP) Type() Type                  { return TypeDREP }
func (m *DREP) IDs() (local, remote uint32) { return m.LocalID, m.RemoteID }

// Append appends m as a frame.
func (m *DREP) Append(b []byte) ([]byte, error) {
	return appendIDsAndData(b, TypeDREP, m.LocalID, m.RemoteID, m.PrivateData)
}

func parseDREP(b []byte) (*DREP, error) {
	local, remote, data, err := parseIDsAndData(TypeDREP, b)
	if err != nil {
		return nil, err
	}
	return &DREP{LocalID: local, RemoteID: remote, PrivateData: data}, nil
}
