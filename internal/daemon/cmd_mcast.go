package daemon

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/vrdma/vrdma/internal/engine"
	"github.com/vrdma/vrdma/internal/proto"
)

// cmdAttachMcast attaches a UD QP to a multicast group (ibv_attach_mcast;
// docs/design/multicast.md). Every new attachment is charged to the tenant
// (mcast); attaching again is not an error and costs nothing, as in
// rdma_rxe. The group is the tenant's: another tenant's QPs attached to the
// same GID on this host are in another group.
func cmdAttachMcast(s *session, body []byte, _ []int) (any, []int, error) {
	req, err := decode[proto.McastReq](body)
	if err != nil {
		return nil, nil, err
	}
	q, err := lookup(s.qps, req.QP, "queue pair")
	if err != nil {
		return nil, nil, err
	}
	if err := mcastCheck(q, req.GID); err != nil {
		return nil, nil, err
	}
	if err := boundMcastRefused(s); err != nil { // cm_device_ud.go
		return nil, nil, err
	}
	if err := s.take(Mcast, 1); err != nil {
		return nil, nil, err
	}
	added, err := q.AttachMcast(req.GID)
	if !added {
		s.give(Mcast, 1)
	}
	if err != nil {
		return nil, nil, mcastError(err, req.GID)
	}
	return done, nil, nil
}

// cmdDetachMcast detaches a QP from a group it is attached to.
func cmdDetachMcast(s *session, body []byte, _ []int) (any, []int, error) {
	req, err := decode[proto.McastReq](body)
	if err != nil {
		return nil, nil, err
	}
	q, err := lookup(s.qps, req.QP, "queue pair")
	if err != nil {
		return nil, nil, err
	}
	if err := mcastCheck(q, req.GID); err != nil {
		return nil, nil, err
	}
	if err := q.DetachMcast(req.GID); err != nil {
		return nil, nil, mcastError(err, req.GID)
	}
	s.give(Mcast, 1)
	return done, nil, nil
}

// mcastCheck refuses what the kernel's ib_attach_mcast refuses with EINVAL
// before a driver sees it: a GID that is not multicast, a QP not UD.
func mcastCheck(q *engine.QP, gid [16]byte) error {
	if !engine.IsMulticastGID(gid) {
		return mcastError(engine.ErrMcastNotGroup, gid)
	}
	if !q.IsUD() {
		return mcastError(engine.ErrMcastNotUD, gid)
	}
	return nil
}

// mcastError says what was wrong with an attach or detach.
func mcastError(err error, gid [16]byte) error {
	g := netip.AddrFrom16(gid)
	switch {
	case errors.Is(err, engine.ErrMcastNotGroup):
		return proto.Errorf(proto.CodeInvalid, "GID %s is not a multicast group: give one in ff00::/8, or an IPv4-mapped address in 224.0.0.0/4", g)
	case errors.Is(err, engine.ErrMcastNotUD):
		return proto.Errorf(proto.CodeInvalid, "group %s: %v; create the QP with IBV_QPT_UD", g, err)
	case errors.Is(err, engine.ErrMcastNotAttached):
		return proto.Errorf(proto.CodeInvalid, "group %s: %v", g, err)
	case errors.Is(err, engine.ErrMcastGroupFull), errors.Is(err, engine.ErrMcastTooMany):
		return proto.Errorf(proto.CodeLimit, "group %s: %v (max_mcast_qp_attach %d, max_mcast_grp %d)", g, err, engine.MaxMcastQPAttach, engine.MaxMcastGroups)
	}
	return proto.Errorf(proto.CodeInternal, "group %s: %v", g, err)
}

// mcastScope names the tenant whose multicast groups the session's QPs
// see: the owner of the instance it attached to, or its own uid on the
// default instance (DESIGN.md, "Who is trusted").
func (s *session) mcastScope() string {
	if inst := s.inst.Load(); inst != nil && inst.Name != DefaultInstance {
		return mcastTenant(inst.Owner.UID)
	}
	return mcastTenant(s.cred.uid)
}

// mcastTenant names the tenant of uid as the engine's groups and the
// switch's records do.
func mcastTenant(uid uint32) string { return fmt.Sprintf("uid %d", uid) }
