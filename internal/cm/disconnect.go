package cm

// DREQ asks to end an established connection.
type DREQ struct {
	LocalID, RemoteID uint32
	PrivateData       []byte
}

func (m *DREQ) Type() Type                  { return TypeDREQ }
func (m *DREQ) IDs() (local, remote uint32) { return m.LocalID, m.RemoteID }

// DREP answers a DREQ: the connection is over on both sides. It is sent
// for a connection the receiver no longer knows too, so that a DREQ whose
// answer was lost still ends.
type DREP struct {
	LocalID, RemoteID uint32
	PrivateData       []byte
}

func (m *DREP) Type() Type                  { return TypeDREP }
func (m *DREP) IDs() (local, remote uint32) { return m.LocalID, m.RemoteID }
