package main

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"syscall"
)

// listenTCP listens on TCP port on every address, for a server whose flag
// (e.g. "--listen-port") sets the port. A port another program holds is a
// *portInUseError, which names the flag.
func listenTCP(port int, flag string) (net.Listener, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(port)))
	if err != nil {
		return nil, listenError(err, port, flag)
	}
	return ln, nil
}

// listenError is err, from listening on port, made to say what to do.
func listenError(err error, port int, flag string) error {
	if errors.Is(err, syscall.EADDRINUSE) {
		return &portInUseError{Err: err, Port: port, Flag: flag}
	}
	return fmt.Errorf("%w (choose another port with %s)", err, flag)
}

// portInUseError is a port a server could not listen on because another
// program (or another copy of it) holds it. errors.Is(err,
// syscall.EADDRINUSE) holds.
type portInUseError struct {
	Err  error
	Port int
	Flag string // the flag that sets the port
}

func (e *portInUseError) Error() string {
	return fmt.Sprintf("%v: another program uses TCP port %d (ss -tlnp 'sport = :%d' shows which); choose another with %s, and give the client the same",
		e.Err, e.Port, e.Port, e.Flag)
}

func (e *portInUseError) Unwrap() error { return e.Err }
