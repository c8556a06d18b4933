// Package cm is the wire format of the connection manager: the messages two
// host daemons exchange to connect a pair of queue pairs (REQ, REP, RTU),
// refuse a request (REJ) and end a connection (DREQ, DREP), as the IBTA
// communication manager defines them (IBTA vol. 1, chapter 12), carried over
// TCP between the daemons instead of as MADs on QP1.
//
// It is a pure codec: no I/O apart from ReadFrame's io.Reader, no clocks, no
// state. Every message has an Append method and a parse function; Parse
// decodes one whole frame and ReadFrame one frame from a stream, each
// checking the header (magic, version, type, length) before it reads the
// body, so that a peer cannot make the decoder allocate or wait for more
// than MaxBody bytes.
//
// A frame is a 6-byte header and a body, integers big-endian:
//
//	0 magic "vC"   2 version (1)   3 type (1 REQ ... 6 DREP)   4 body length u16 (≤ MaxBody)
//
// Every body starts with the sender's connection id and the receiver's (0
// in a REQ; in a REJ one of the two may be 0, when its sender gave the
// connection no id or has not learnt the receiver's), then the fields of
// its type, and last the private data: a length byte and the bytes, bounded
// by rdma_cm's limits (MaxPrivateData).
//
//	b, err := (&cm.RTU{LocalID: 7, RemoteID: 9}).Append(nil)
//	m, n, err := cm.Parse(b) // m.(*cm.RTU), n == len(b)
package cm
