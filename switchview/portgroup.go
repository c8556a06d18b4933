package switchview

// PortGroup is a segment of the switch: VLAN, priority, path MTU and
// partition of the adapters attached to it. The daemon lists port groups
// with the defaults applied; one to add may leave MTU and PKey 0.
type PortGroup struct {
	Name string `json:"name"`
	VLAN uint16 `json:"vlan"`           // the 802.1Q VLAN ID, 0 (untagged) to 4094
	PCP  uint8  `json:"pcp"`            // the 802.1p priority, 0 to 7
	DSCP uint8  `json:"dscp"`           // the IP DSCP of its RoCEv2 packets, 0 to 63
	MTU  int    `json:"mtu,omitempty"`  // bytes: 256 to 4096 (0: the switch's default)
	PKey uint16 `json:"pkey,omitempty"` // 0: the default partition
	// Adapters counts the adapters attached (in a list; an added group's
	// is not read).
	Adapters int `json:"adapters,omitempty"`
}

// PortGroupList is the switch's port groups (`vrdma portgroup show
// --json`).
type PortGroupList struct {
	PortGroups []PortGroup `json:"portgroups"`
}
