package pcap

import "errors"

// Link types (the LINKTYPE_ values of tcpdump.org/linktypes.html).
const (
	LinkTypeEthernet = 1   // IEEE 802.3 Ethernet
	LinkTypeRaw      = 101 // raw IPv4 or IPv6, no link-layer header
	LinkTypeLinuxSLL = 113 // Linux "cooked" capture, version 1
	LinkTypeIPv4     = 228 // raw IPv4
	LinkTypeIPv6     = 229 // raw IPv6
)

// File magic numbers as read in the writer's byte order.
const (
	magicMicro = 0xa1b2c3d4
	magicNano  = 0xa1b23c4d
)

const (
	fileHeaderLen   = 24
	recordHeaderLen = 16
	// DefaultSnaplen is the snapshot length a Writer declares.
	DefaultSnaplen = 262144
	// maxRecordLen bounds the record a Reader accepts, so a corrupt length
	// cannot make it allocate without limit.
	maxRecordLen = 1 << 24
)

// ErrFormat reports a file that is not a classic pcap file, or a record
// header that cannot be right.
var ErrFormat = errors.New("pcap: bad file format")
