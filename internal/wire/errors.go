package wire

import "errors"

// Sentinel errors. Every error Decode, DecodeTransport and VerifyICRC return
// matches exactly one of them with errors.Is; its message says which check
// failed.
var (
	// ErrTruncated: the input is shorter than its headers or its length
	// fields say.
	ErrTruncated = errors.New("wire: truncated packet")
	// ErrVersion: the IP version is neither 4 nor 6, or the BTH transport
	// header version (TVer) is not 0.
	ErrVersion = errors.New("wire: unsupported version")
	// ErrOpcode: the BTH opcode is not one vrdma speaks (see Opcode.Valid).
	ErrOpcode = errors.New("wire: unsupported BTH opcode")
	// ErrLength: length fields disagree with each other or with the input.
	ErrLength = errors.New("wire: inconsistent length")
	// ErrICRC: the invariant CRC stored in the packet is wrong.
	ErrICRC = errors.New("wire: ICRC mismatch")
	// ErrNotRoCE: the packet is not RoCEv2 (not UDP, not to port 4791, or
	// an IP fragment).
	ErrNotRoCE = errors.New("wire: not a RoCEv2 packet")
)

// wireError is a preallocated error with a precise message that unwraps to
// one of the sentinels, so returning it costs no allocation.
type wireError struct {
	kind error
	msg  string
}

func (e *wireError) Error() string { return e.msg }
func (e *wireError) Unwrap() error { return e.kind }

func newErr(kind error, msg string) error { return &wireError{kind: kind, msg: "wire: " + msg} }

// The failures the decoders report.
var (
	errEmpty         = newErr(ErrTruncated, "empty packet")
	errIPVersion     = newErr(ErrVersion, "IP version is neither 4 nor 6")
	errIPv4Short     = newErr(ErrTruncated, "shorter than an IPv4 header")
	errIPv4IHL       = newErr(ErrLength, "IPv4 header length (IHL) below 5")
	errIPv4HdrShort  = newErr(ErrTruncated, "shorter than the IPv4 header length (IHL)")
	errIPv4TotalLong = newErr(ErrTruncated, "IPv4 total length exceeds the packet")
	errIPv4TotalBad  = newErr(ErrLength, "IPv4 total length differs from the packet length")
	errIPv4Frag      = newErr(ErrNotRoCE, "IPv4 fragment")
	errIPv4Proto     = newErr(ErrNotRoCE, "IPv4 protocol is not UDP")
	errIPv6Short     = newErr(ErrTruncated, "shorter than an IPv6 header")
	errIPv6PayLong   = newErr(ErrTruncated, "IPv6 payload length exceeds the packet")
	errIPv6PayBad    = newErr(ErrLength, "IPv6 payload length differs from the packet length")
	errIPv6Next      = newErr(ErrNotRoCE, "IPv6 next header is not UDP")
	errUDPShort      = newErr(ErrTruncated, "shorter than a UDP header")
	errUDPPort       = newErr(ErrNotRoCE, "UDP destination port is not 4791")
	errUDPLength     = newErr(ErrLength, "UDP length differs from the IP payload length")
	errBTHShort      = newErr(ErrTruncated, "UDP payload shorter than BTH and ICRC")
	errOpcode        = newErr(ErrOpcode, "BTH opcode is not RC, UC or UD SEND (see Opcode.Valid)")
	errTVer          = newErr(ErrVersion, "BTH transport header version (TVer) is not 0")
	errHdrShort      = newErr(ErrTruncated, "UDP payload shorter than the opcode's headers and ICRC")
	errPad           = newErr(ErrLength, "BTH PadCnt exceeds the payload")
	errAlign         = newErr(ErrLength, "payload plus PadCnt is not a multiple of 4 bytes")
	errNoPayload     = newErr(ErrLength, "payload on an opcode that carries none")
	errFETH          = newErr(ErrLength, "FETH reserved bits (31-6) are not 0")
	errICRCShort     = newErr(ErrTruncated, "too short to hold IP, UDP, BTH and ICRC")
	errICRC          = newErr(ErrICRC, "ICRC mismatch")
)
