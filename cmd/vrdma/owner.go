package main

import (
	"fmt"
	"os/user"
	"strconv"
	"strings"

	"github.com/vrdma/vrdma"
)

// accounts looks users and groups up (os/user; tests give a fake).
type accounts struct {
	userByName  func(name string) (uid, gid uint32, err error)
	userByID    func(uid uint32) (name string, gid uint32, err error)
	groupByName func(name string) (gid uint32, err error)
}

// systemAccounts are the host's users and groups.
var systemAccounts = accounts{
	userByName: func(name string) (uint32, uint32, error) {
		u, err := user.Lookup(name)
		if err != nil {
			return 0, 0, err
		}
		return idsOf(u.Uid, u.Gid)
	},
	userByID: func(uid uint32) (string, uint32, error) {
		u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10))
		if err != nil {
			return "", 0, err
		}
		_, gid, err := idsOf(u.Uid, u.Gid)
		return u.Username, gid, err
	},
	groupByName: func(name string) (uint32, error) {
		g, err := user.LookupGroup(name)
		if err != nil {
			return 0, err
		}
		gid, err := strconv.ParseUint(g.Gid, 10, 32)
		return uint32(gid), err
	},
}

func idsOf(uid, gid string) (uint32, uint32, error) {
	u, err := strconv.ParseUint(uid, 10, 32)
	if err != nil {
		return 0, 0, fmt.Errorf("uid %q is not a number", uid)
	}
	g, err := strconv.ParseUint(gid, 10, 32)
	if err != nil {
		return 0, 0, fmt.Errorf("gid %q is not a number", gid)
	}
	return uint32(u), uint32(g), nil
}

// parseOwner reads --owner's USER[:GROUP]: each a name or a number. Without
// GROUP the owner's group is the user's primary one, which needs the user
// to exist on this host.
func parseOwner(s string, acc accounts) (vrdma.Owner, error) {
	name, group, hasGroup := strings.Cut(s, ":")
	const form = "give USER or USER:GROUP, each a name or a number (alice, 1000:1000, alice:tenants)"
	if name == "" || hasGroup && (group == "" || strings.Contains(group, ":")) {
		return vrdma.Owner{}, fmt.Errorf("%q: %s", s, form)
	}
	var o vrdma.Owner
	primary, known := uint32(0), false
	if n, err := parseID(name); err == nil {
		o.UID = n
		if _, gid, err := acc.userByID(n); err == nil {
			primary, known = gid, true
		}
	} else if uid, gid, err := acc.userByName(name); err == nil {
		o.UID, primary, known = uid, gid, true
	} else {
		return vrdma.Owner{}, fmt.Errorf("%q: no user %q on this host (%v): %s", s, name, err, form)
	}
	switch {
	case hasGroup:
		if n, err := parseID(group); err == nil {
			o.GID = n
		} else if gid, err := acc.groupByName(group); err == nil {
			o.GID = gid
		} else {
			return vrdma.Owner{}, fmt.Errorf("%q: no group %q on this host (%v): %s", s, group, err, form)
		}
	case known:
		o.GID = primary
	default:
		return vrdma.Owner{}, fmt.Errorf("%q: uid %d has no account here to take a primary group from: give it as %d:GROUP", s, o.UID, o.UID)
	}
	return o, nil
}

// parseID reads a uid or gid written as a number (not the all-ones -1).
func parseID(s string) (uint32, error) {
	if s == "" || s[0] < '0' || s[0] > '9' {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil || n == 1<<32-1 {
		return 0, fmt.Errorf("%q is not a uid or gid", s)
	}
	return uint32(n), nil
}

// ownerName prints an owner: the user's name if the host knows the uid,
// else the number; "-" for none (another host's instance).
func ownerName(o *vrdma.Owner, acc accounts) string {
	if o == nil {
		return "-"
	}
	if name, _, err := acc.userByID(o.UID); err == nil {
		return name
	}
	return strconv.FormatUint(uint64(o.UID), 10)
}
