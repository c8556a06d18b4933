package cm

// REJ refuses a request or a reply, or tears down a connection being set
// up. LocalID is 0 when the sender never gave the connection an id (a
// request to a port nobody listens on); RemoteID is 0 when a requester
// gives up before it learnt the responder's id.
type REJ struct {
	LocalID, RemoteID uint32
	Reason            Reason
	Text              string // why, for people (in process only: a MAD has none): "no listener on port 7471"
	PrivateData       []byte
}

func (m *REJ) Type() Type                  { return TypeREJ }
func (m *REJ) IDs() (local, remote uint32) { return m.LocalID, m.RemoteID }
