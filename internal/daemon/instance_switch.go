package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/vrdma/vrdma/internal/fabric"
	"github.com/vrdma/vrdma/internal/proto"
	"github.com/vrdma/vrdma/internal/switchagent"
	"golang.org/x/sys/unix"
)

// instanceInfo describes inst as the command channel reports it to
// viewer: its names as viewer sees them (names.go).
func instanceInfo(inst *Instance, host string, viewer creds) proto.InstanceInfo {
	owner := inst.Owner
	info := proto.InstanceInfo{Name: shownName(viewer, inst.Name), Host: host, TrustGroup: shownName(viewer, inst.TrustGroup), PortGroup: inst.PortGroup,
		Native: inst.Native, Async: inst.Async, Pin: inst.Pin, Owner: &owner, Temporary: inst.Temporary}
	for _, a := range inst.Adapters {
		info.Adapters = append(info.Adapters, adapterInfo(a))
	}
	return info
}

// check checks a new instance against the switch and the host
// before it is created: its port group exists, no other host has an
// instance of that name, and pinned memory can be locked.
func (m *switchMember) check(spec proto.InstanceSpec) error {
	if spec.Pin {
		if err := canLockMemory(); err != nil {
			return proto.Errorf(proto.CodeMemlock, "instance %q asks for pinned memory (sched.mem.pin) but %v", spec.Name, err)
		}
	}
	sw := m.agent
	if sw == nil {
		if spec.PortGroup != "" && spec.PortGroup != DefaultPortGroup {
			return proto.Errorf(proto.CodeInvalid, "instance %q: port group %q needs a switch and this daemon is on none: start it without --no-switch, or leave --portgroup out", spec.Name, spec.PortGroup)
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(sw.Context(), 10*time.Second)
	defer cancel()
	pg := spec.PortGroup
	if pg == "" {
		pg = DefaultPortGroup
	}
	if _, err := sw.Fabric().PortGroup(ctx, pg); err != nil {
		if errors.Is(err, fabric.ErrNotFound) {
			return proto.Errorf(proto.CodeNotFound, "instance %q: port group %q does not exist on switch %s: create it with `vrdma portgroup add %s`, or pick one `vrdma portgroup show` lists", spec.Name, pg, sw.Name(), pg)
		}
		return proto.Errorf(proto.CodeInternal, "instance %q: switch: %v", spec.Name, err)
	}
	if other, err := sw.Fabric().Instance(ctx, spec.Name); err == nil && other.Host != m.hostName {
		return proto.Errorf(proto.CodeBusy, "instance %q exists on host %s: instance names are switch-wide; pick another name", spec.Name, other.Host)
	}
	return nil
}

// canLockMemory reports why this daemon could not lock an instance's
// registered memory, or nil.
func canLockMemory() error {
	if os.Geteuid() == 0 {
		return nil // CAP_IPC_LOCK
	}
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &lim); err != nil {
		return fmt.Errorf("RLIMIT_MEMLOCK cannot be read (%v)", err)
	}
	if lim.Cur == unix.RLIM_INFINITY {
		return nil
	}
	return fmt.Errorf("the daemon may lock only %d bytes (RLIMIT_MEMLOCK): run it as root, or with LimitMEMLOCK=infinity (ulimit -l unlimited)", lim.Cur)
}

// switchInstance is inst as the switch agent publishes it.
func switchInstance(inst *Instance) switchagent.Instance {
	return switchagent.Instance{Name: inst.Name, PortGroup: inst.PortGroup, Native: inst.Native, Async: inst.Async, Uplink: inst.Uplink, Adapters: inst.Adapters}
}

// publish puts inst's record on the switch (the default instance,
// which every daemon has, stays local).
func (m *switchMember) publish(inst *Instance) error {
	sw := m.agent
	if sw == nil || inst.Name == DefaultInstance {
		return nil
	}
	if err := sw.PublishInstance(switchInstance(inst)); err != nil {
		var ve *fabric.ValidationError
		if errors.As(err, &ve) {
			return proto.Errorf(proto.CodeInvalid, "%v", err)
		}
		return proto.Errorf(proto.CodeInternal, "instance %q: switch: %v", inst.Name, err)
	}
	return nil
}

// unpublish removes a deleted instance's record.
func (m *switchMember) unpublish(name string) {
	sw := m.agent
	if sw == nil || name == DefaultInstance {
		return
	}
	sw.UnpublishInstance(name)
}

// publishAll puts every local instance on the switch (at start).
func (m *switchMember) publishAll() {
	insts := m.insts.all()
	for _, inst := range insts {
		if err := m.publish(inst); err != nil {
			m.log.Warn("could not publish an instance on the switch", "instance", inst.Name, "err", err)
		}
	}
}

// remote lists the instances the switch has on other hosts, from
// their records (an error on no switch).
func (m *switchMember) remote() ([]proto.InstanceInfo, error) {
	sw := m.agent
	if sw == nil {
		return nil, proto.Errorf(proto.CodeState, "this daemon is on no switch, so it knows only its own instances: leave --all out")
	}
	ctx, cancel := context.WithTimeout(sw.Context(), 10*time.Second)
	defer cancel()
	recs, err := sw.Fabric().Instances(ctx)
	if err != nil {
		return nil, switchErr(err)
	}
	var out []proto.InstanceInfo
	for _, r := range recs {
		if r.Host == m.hostName {
			continue
		}
		info := proto.InstanceInfo{Name: r.Name, Host: r.Host, Remote: true}
		for _, a := range r.Adapters {
			info.PortGroup = a.PortGroup
			info.Native = info.Native || a.NativeEndpoint
			info.Async = info.Async || a.Async
			info.Adapters = append(info.Adapters, proto.AdapterInfo{Name: fmt.Sprintf("vrdma%d", a.Index), Index: a.Index, MAC: a.MAC, Async: a.Async})
		}
		out = append(out, info)
	}
	return out, nil
}
