package cm

import "unicode/utf8"

// REJ refuses a request or a reply, or tears down a connection being set
// up. LocalID is 0 when the sender never gave the connection an id (a
// request to a port nobody listens on); RemoteID is 0 when a requester
// gives up before it learnt the responder's id.
//
//	0 local id u32   4 remote id u32   8 reason u16
//	10 text length u8 (≤ 128)   11 text (UTF-8)   then private data length u8 (≤ 148), private data
type REJ struct {
	LocalID, RemoteID uint32
	Reason            Reason
	Text              string // why, for people: "no listener on port 7471"
	PrivateData       []byte
}

func (m *REJ) Type() Type                  { return TypeREJ }
func (m *REJ) IDs() (local, remote uint32) { return m.LocalID, m.RemoteID }

// Append appends m as a frame.
func (m *REJ) Append(b []byte) ([]byte, error) {
	w := newWriter(b, TypeREJ)
	w.ids(m.LocalID, m.RemoteID)
	w.u16(uint16(m.Reason))
	if !utf8.ValidString(m.Text) && w.err == nil {
		w.err = badField(TypeREJ, "the reason text is not UTF-8")
	}
	w.bytes([]byte(m.Text), "the reason text", MaxRejectText, ErrMalformed)
	w.privateData(m.PrivateData)
	return w.finish(b)
}

func parseREJ(b []byte) (*REJ, error) {
	r := &reader{t: TypeREJ, b: b}
	m := &REJ{}
	m.LocalID, m.RemoteID = r.ids()
	m.Reason = Reason(r.u16("the reason"))
	text := r.bytes("the reason text", MaxRejectText, ErrMalformed)
	m.PrivateData = r.privateData()
	r.checkIDs(m.LocalID, m.RemoteID)
	if err := r.done(); err != nil {
		return nil, err
	}
	if !utf8.Valid(text) {
		return nil, badField(TypeREJ, "the reason text is not UTF-8")
	}
	m.Text = string(text)
	return m, nil
}
