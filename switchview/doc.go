// Package switchview is the distributed switch as a daemon on it shows it:
// the records `vrdma switch show`, `vrdma host show`, `vrdma portgroup
// show`, `vrdma path` and `vrdma mcast show` print, with their JSON form.
//
// Each record is defined here once. Package vrdma (the module's root)
// returns these types from its Admin methods (Admin.Switch, Admin.Hosts,
// Admin.PortGroups, Admin.Path, Admin.McastGroups), the daemon sends them
// as its replies, and the vrdma command prints them: the JSON tags are the
// wire form between the daemon and the library, and what `--json` prints.
//
// The package imports nothing but the standard library, so a program that
// links package vrdma does not link the daemon's etcd client. The records
// the switch keeps in etcd are the daemon's own (internal/fabric); these
// are views of them, as one daemon reports them.
package switchview
