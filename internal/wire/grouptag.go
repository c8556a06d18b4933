package wire

// The group tag: the tenant of a multicast datagram between vrdma daemons
// (docs/design/multicast.md, "Tenants between hosts"). RoCEv2 has no
// field for it, so on the daemons' own authenticated channel (package
// tcplink) a multicast datagram travels as a tagged frame:
//
//	offset size
//	 0      1   GroupTagKind (0x01: IP version 0, never an IP packet)
//	 1      1   n, the tenant's length (1..MaxGroupTenant)
//	 2      n   the tenant, printable ASCII ("uid 1000")
//	 2+n        the datagram: one whole IPv4 or IPv6 packet
//
// The receiving engine hands the datagram to the group's members of that
// tenant only.

// GroupTagKind is the first byte of a tagged frame.
const GroupTagKind = 0x01

// MaxGroupTenant is the longest tenant a tag carries.
const MaxGroupTenant = 32

// The failures SplitGroupTag reports.
var (
	errTagKind   = newErr(ErrVersion, "not a group-tagged frame")
	errTagShort  = newErr(ErrTruncated, "group tag cut short")
	errTagLength = newErr(ErrLength, "group tag's tenant length is 0 or above 32")
	errTagChar   = newErr(ErrLength, "group tag's tenant is not printable ASCII")
)

// GroupTagLen is the length of the tag AppendGroupTag writes for tenant.
func GroupTagLen(tenant string) int { return 2 + len(tenant) }

// AppendGroupTag appends the tag of tenant, which must be 1 to
// MaxGroupTenant printable ASCII characters (ValidGroupTenant); the
// datagram follows it.
func AppendGroupTag(dst []byte, tenant string) []byte {
	dst = append(dst, GroupTagKind, byte(len(tenant)))
	return append(dst, tenant...)
}

// ValidGroupTenant reports whether a tag can carry tenant.
func ValidGroupTenant(tenant string) bool {
	if len(tenant) == 0 || len(tenant) > MaxGroupTenant {
		return false
	}
	for i := 0; i < len(tenant); i++ {
		if tenant[i] < 0x20 || tenant[i] > 0x7e {
			return false
		}
	}
	return true
}

// IsGroupTagged reports whether frame starts with a group tag (its first
// byte says so; SplitGroupTag checks the rest).
func IsGroupTagged(frame []byte) bool { return len(frame) > 0 && frame[0] == GroupTagKind }

// SplitGroupTag splits a tagged frame into its tenant and its datagram,
// both in place in frame; it checks the tag, not the datagram. It
// allocates nothing.
func SplitGroupTag(frame []byte) (tenant, datagram []byte, err error) {
	switch {
	case !IsGroupTagged(frame):
		return nil, nil, errTagKind
	case len(frame) < 2:
		return nil, nil, errTagShort
	}
	n := int(frame[1])
	if n == 0 || n > MaxGroupTenant {
		return nil, nil, errTagLength
	}
	if len(frame) < 2+n {
		return nil, nil, errTagShort
	}
	tenant = frame[2 : 2+n]
	for _, c := range tenant {
		if c < 0x20 || c > 0x7e {
			return nil, nil, errTagChar
		}
	}
	return tenant, frame[2+n:], nil
}
