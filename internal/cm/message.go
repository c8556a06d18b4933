package cm

import "fmt"

// Message is one connection manager message.
type Message interface {
	// Type is the message's type.
	Type() Type
	// IDs returns the sender's connection id and the receiver's.
	IDs() (local, remote uint32)
}

// Type says what a message is.
type Type uint8

// The message types, as IBTA names them.
const (
	TypeREQ  Type = 1 // connection request
	TypeREP  Type = 2 // reply to a request
	TypeRTU  Type = 3 // ready to use: the requester confirms a reply
	TypeREJ  Type = 4 // reject
	TypeDREQ Type = 5 // disconnection request
	TypeDREP Type = 6 // reply to a disconnection request
	typeMax  Type = 7
)

var typeNames = [...]string{"", "REQ", "REP", "RTU", "REJ", "DREQ", "DREP"}

func (t Type) String() string {
	if t > 0 && t < typeMax {
		return typeNames[t]
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// MaxPrivateData is how many bytes of private data a message of type t
// carries at most: rdma_cm's limits over IB (its REQ gives 36 of the IB
// CM's 92 bytes to its own header).
func MaxPrivateData(t Type) int {
	switch t {
	case TypeREQ:
		return 56
	case TypeREP:
		return 196
	case TypeRTU:
		return 224
	case TypeREJ:
		return 148
	case TypeDREQ, TypeDREP:
		return 220
	}
	return 0
}

// MaxRejectText bounds the reason text of a REJ.
const MaxRejectText = 128

// Max24 is the largest QPN or PSN: both are 24-bit numbers.
const Max24 = 1<<24 - 1
