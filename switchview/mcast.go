package switchview

// McastGroup is one tenant's multicast group on one host of the switch,
// as the switch records it (`vrdma mcast show`; docs/design/multicast.md).
type McastGroup struct {
	Group  string `json:"group"`  // the group's IP address: 239.1.2.3, ff0e::1
	Tenant string `json:"tenant"` // its owner, "uid N"
	Host   string `json:"host"`   // the host whose QPs are attached
	QPs    int    `json:"qps"`    // how many of the tenant's QPs are attached there
}

// McastList is the switch's multicast groups: every tenant's for an
// administrator, the caller's own tenant's for anyone else (`vrdma mcast
// show --json`).
type McastList struct {
	Groups []McastGroup `json:"groups"`
}
