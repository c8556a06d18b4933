package daemon

import (
	"github.com/vrdma/vrdma/internal/proto"
	"golang.org/x/sys/unix"
)

// command is how the daemon runs one kind of request.
type command struct {
	// who may run it: anyone (every user of the socket; a command on an
	// instance checks that instance's owner itself, access.go) or admins.
	who who
	// device: the command works on the connection's opened device, under
	// the session's lock.
	device bool
	// takesFDs: run owns the descriptors that came with the request;
	// otherwise they are closed before it runs.
	takesFDs bool
	// run returns the reply and the descriptors it passes, which are new
	// ones: the dispatcher closes them once the reply is sent.
	run func(s *session, body []byte, fds []int) (resp any, out []int, err error)
}

var commands map[proto.Op]command

func init() {
	commands = map[proto.Op]command{
		proto.OpHello:           {run: cmdHello},
		proto.OpCreateInstance:  {run: cmdCreateInstance},
		proto.OpDeleteInstance:  {run: cmdDeleteInstance},
		proto.OpListInstances:   {run: cmdListInstances},
		proto.OpStats:           {run: cmdStats},
		proto.OpQueryDevice:     {device: true, run: cmdQueryDevice},
		proto.OpQueryPort:       {device: true, run: cmdQueryPort},
		proto.OpAllocPD:         {device: true, run: cmdAllocPD},
		proto.OpDeallocPD:       {device: true, run: cmdDeallocPD},
		proto.OpRegMR:           {device: true, takesFDs: true, run: cmdRegMR},
		proto.OpDeregMR:         {device: true, run: cmdDeregMR},
		proto.OpReregMR:         {device: true, takesFDs: true, run: cmdReregMR},
		proto.OpAllocMW:         {device: true, run: cmdAllocMW},
		proto.OpDeallocMW:       {device: true, run: cmdDeallocMW},
		proto.OpImportDevice:    {takesFDs: true, run: cmdImportDevice}, // import.go
		proto.OpImportObject:    {device: true, run: cmdImportObject},
		proto.OpCreateCQ:        {device: true, run: cmdCreateCQ},
		proto.OpDestroyCQ:       {device: true, run: cmdDestroyCQ},
		proto.OpResizeCQ:        {device: true, run: cmdResizeCQ},
		proto.OpCreateSRQ:       {device: true, run: cmdCreateSRQ},
		proto.OpOpenXRCD:        {device: true, takesFDs: true, run: cmdOpenXRCD},
		proto.OpCloseXRCD:       {device: true, run: cmdCloseXRCD},
		proto.OpOpenQP:          {device: true, run: cmdOpenQP},
		proto.OpDestroySRQ:      {device: true, run: cmdDestroySRQ},
		proto.OpModifySRQ:       {device: true, run: cmdModifySRQ}, // cmd_srq_modify.go
		proto.OpQuerySRQ:        {device: true, run: cmdQuerySRQ},
		proto.OpCreateQP:        {device: true, run: cmdCreateQP},
		proto.OpModifyQP:        {device: true, run: cmdModifyQP},
		proto.OpQueryQP:         {device: true, run: cmdQueryQP},
		proto.OpDestroyQP:       {device: true, run: cmdDestroyQP},
		proto.OpAttachMcast:     {device: true, run: cmdAttachMcast}, // cmd_mcast.go
		proto.OpDetachMcast:     {device: true, run: cmdDetachMcast},
		proto.OpCreateAH:        {device: true, run: cmdCreateAH},
		proto.OpDestroyAH:       {device: true, run: cmdDestroyAH},
		proto.OpMapMR:           {device: true, run: cmdMapMR},
		proto.OpLinkAdd:         {who: admins, run: cmdLinkAdd},
		proto.OpLinkDelete:      {who: admins, run: cmdLinkDelete},
		proto.OpListLinks:       {run: cmdListLinks},
		proto.OpSwitchShow:      {run: cmdSwitchShow},
		proto.OpPortGroupAdd:    {who: admins, run: cmdPortGroupAdd},
		proto.OpPortGroupDelete: {who: admins, run: cmdPortGroupDelete},
		proto.OpPortGroupList:   {run: cmdPortGroupList},
		proto.OpHostList:        {run: cmdHostList},
		proto.OpMcastList:       {run: cmdMcastList}, // cmd_mcast_list.go
		proto.OpPath:            {run: cmdPath},
		proto.OpCMListen:        {device: true, run: cmdCMListen}, // cm_cmd.go
		proto.OpCMCancelListen:  {device: true, run: cmdCMCancelListen},
		proto.OpCMConnect:       {device: true, run: cmdCMConnect},
		proto.OpCMAccept:        {device: true, run: cmdCMAccept},
		proto.OpCMReject:        {device: true, run: cmdCMReject},
		proto.OpCMDisconnect:    {device: true, run: cmdCMDisconnect},
		proto.OpCMResolve:       {device: true, run: cmdCMResolve},
	}
}

// handleOn runs one command that came on c (the session's connection or
// one ibv_import_device added). It owns fds: each is either consumed or
// closed.
func (s *session) handleOn(c *proto.Conn, op proto.Op, body []byte, fds []int) (resp any, out []int, err error) {
	cmd, ok := commands[op]
	if !cmd.takesFDs {
		proto.CloseFDs(fds)
		fds = nil
	}
	fail := func(err error) (any, []int, error) {
		proto.CloseFDs(fds)
		return nil, nil, err
	}
	if op != proto.OpHello && s.instance() == nil {
		return fail(proto.Errorf(proto.CodeInvalid, "%v before hello: open the device first", op))
	}
	if !ok {
		return fail(proto.Errorf(proto.CodeInvalid, "unknown command %v: the library is newer than this daemon, upgrade the daemon", op))
	}
	if err := s.mayRun(op, cmd.who); err != nil {
		return fail(err)
	}
	if !cmd.device {
		return cmd.run(s, body, fds)
	}
	if s.adapter == nil {
		return fail(proto.Errorf(proto.CodeInvalid, "%v needs an opened device: this connection named none in hello", op))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.joined.isEnded() && c != s.conn {
		return fail(proto.Errorf(proto.CodeInvalid, "%v on an imported device whose session has ended: the context it was imported from is closed", op))
	}
	s.from = c
	return cmd.run(s, body, fds)
}

// shareFDs returns the descriptors a reply passes, each a new one that the
// dispatcher closes once sent: a duplicate of the object's memfd, then the
// doorbell ends, if any.
func shareFDs(region func() int, doorbell func() (int, int, error)) ([]int, error) {
	m, err := unix.Dup(region())
	if err != nil {
		return nil, proto.Errorf(proto.CodeLimit, "the daemon is out of descriptors (%v): close objects or devices, or raise the daemon's RLIMIT_NOFILE", err)
	}
	if doorbell == nil {
		return []int{m}, nil
	}
	r, w, err := doorbell()
	if err != nil {
		unix.Close(m)
		return nil, proto.Errorf(proto.CodeLimit, "the daemon is out of descriptors (%v): close objects or devices, or raise the daemon's RLIMIT_NOFILE", err)
	}
	return []int{m, r, w}, nil
}

// decode reads a request body of type T.
func decode[T any](body []byte) (T, error) {
	var v T
	err := proto.Decode(body, &v)
	return v, err
}

// lookup finds the object with handle h, or says which kind is missing.
func lookup[T any](m map[uint32]T, h uint32, what string) (T, error) {
	v, ok := m[h]
	if !ok {
		return v, proto.Errorf(proto.CodeNotFound, "no %s with handle %d on this device", what, h)
	}
	return v, nil
}

var done = struct{}{} // the body of a reply that carries nothing
