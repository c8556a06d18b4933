package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"time"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/ibv"
)

// The connection-setup benchmark (bench/cm.sh): vrdma's connection manager
// through the Go API, and TCP connect/accept, on the same path.
//
//	anchor cm serve PORT                 accept connections on PORT for ever, a fresh QP each
//	anchor cm connect ADDR PORT SECONDS  connect one at a time for SECONDS: µs per connection
//	anchor cm hold ADDR PORT             connect once, print when, and wait to be killed
//	anchor tcpconn serve PORT            accept TCP connections and close them
//	anchor tcpconn connect ADDR PORT SECONDS   the TCP anchor of cm connect
//	anchor tcpconn hold ADDR PORT        the TCP anchor of cm hold
//
// A serve prints one line per connection that ends, with the time it
// noticed the end (unix ns), so that a script which kills a holder can say
// how long the listener took to notice.

// cmPort parses a port argument.
func cmPort(s string) (uint16, error) {
	p, err := strconv.ParseUint(s, 10, 16)
	if err != nil || p == 0 {
		return 0, fmt.Errorf("port %q: give a port from 1 to 65535", s)
	}
	return uint16(p), nil
}

// cmSide is a device with what a QP needs.
type cmSide struct {
	dev *vrdma.Device
	pd  *vrdma.PD
	cq  *vrdma.CQ
}

func openCMSide() (*cmSide, error) {
	dev, err := vrdma.Open("vrdma0")
	if err != nil {
		return nil, err
	}
	pd, err := dev.AllocPD()
	if err != nil {
		dev.Close()
		return nil, err
	}
	cq, err := dev.CreateCQ(256)
	if err != nil {
		dev.Close()
		return nil, err
	}
	return &cmSide{dev: dev, pd: pd, cq: cq}, nil
}

func (s *cmSide) qp() (*vrdma.QP, error) {
	return s.pd.CreateQP(vrdma.QPInitAttr{Type: ibv.RC, SendCQ: s.cq, RecvCQ: s.cq,
		Cap: vrdma.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
}

func cmBench(args []string) error {
	if len(args) < 2 {
		return errors.New("cm serve PORT | cm connect ADDR PORT SECONDS | cm hold ADDR PORT")
	}
	s, err := openCMSide()
	if err != nil {
		return err
	}
	defer s.dev.Close()
	switch args[0] {
	case "serve":
		port, err := cmPort(args[1])
		if err != nil {
			return err
		}
		return s.serve(port)
	case "connect", "hold":
		if len(args) < 3 {
			return errors.New("cm connect ADDR PORT SECONDS | cm hold ADDR PORT")
		}
		addr, err := netip.ParseAddr(args[1])
		if err != nil {
			return err
		}
		port, err := cmPort(args[2])
		if err != nil {
			return err
		}
		if args[0] == "hold" {
			return s.hold(addr, port)
		}
		if len(args) < 4 {
			return errors.New("cm connect ADDR PORT SECONDS")
		}
		secs, err := strconv.ParseFloat(args[3], 64)
		if err != nil {
			return err
		}
		return s.connect(addr, port, time.Duration(secs*float64(time.Second)))
	}
	return fmt.Errorf("cm %s: serve, connect or hold", args[0])
}

// serve accepts every request with a new QP and destroys it when the
// connection ends, printing when it noticed.
func (s *cmSide) serve(port uint16) error {
	l, err := s.dev.Listen(port)
	if err != nil {
		return err
	}
	ctx := context.Background()
	for {
		req, err := l.Accept(ctx)
		if err != nil {
			return err
		}
		qp, err := s.qp()
		if err != nil {
			_ = req.Reject("no QP", nil)
			continue
		}
		go func() {
			defer qp.Destroy()
			actx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			c, err := req.Accept(actx, qp, nil)
			if err != nil {
				return
			}
			<-c.Done()
			emit(map[string]any{"source": "vrdma-cm", "test": "cm_noticed", "unix_ns": time.Now().UnixNano()})
		}()
	}
}

// connect dials one connection at a time for d: each on a QP in RESET
// (created before the clock starts), timed from the call to Dial until
// both QPs are in RTS; then disconnected and destroyed, untimed.
func (s *cmSide) connect(addr netip.Addr, port uint16, d time.Duration) error {
	ctx := context.Background()
	var times []time.Duration
	end := time.Now().Add(d)
	start := time.Now()
	for time.Now().Before(end) {
		qp, err := s.qp()
		if err != nil {
			return err
		}
		dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		t0 := time.Now()
		c, err := s.dev.Dial(dctx, qp, addr, port, nil)
		dt := time.Since(t0)
		if err == nil {
			err = c.Disconnect(dctx, nil)
		}
		cancel()
		qp.Destroy()
		if err != nil {
			return fmt.Errorf("connection %d: %w", len(times)+1, err)
		}
		times = append(times, dt)
	}
	cycle := time.Since(start)
	return emitConnTimes("vrdma-cm", times, cycle)
}

// emitConnTimes prints a row: the median and mean time to connect and the
// rate of whole cycles (connect, disconnect, and the QP's create and
// destroy for vrdma; connect and close for TCP).
func emitConnTimes(source string, times []time.Duration, cycle time.Duration) error {
	if len(times) == 0 {
		return errors.New("no connection completed in time")
	}
	var sum time.Duration
	for _, t := range times {
		sum += t
	}
	slices.Sort(times)
	emit(map[string]any{"source": source, "test": "connect", "msg_size": 0, "connections": len(times),
		"latency_us":     float64(times[len(times)/2].Nanoseconds()) / 1e3,
		"mean_us":        float64(sum.Nanoseconds()) / float64(len(times)) / 1e3,
		"p99_us":         float64(times[len(times)*99/100].Nanoseconds()) / 1e3,
		"cycles_per_sec": float64(len(times)) / cycle.Seconds()})
	return nil
}

// hold connects once, prints when, and waits to be killed: the listener
// notices the end when the holder's daemon disconnects the dead
// process's connection.
func (s *cmSide) hold(addr netip.Addr, port uint16) error {
	qp, err := s.qp()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.dev.Dial(ctx, qp, addr, port, nil); err != nil {
		return err
	}
	emit(map[string]any{"source": "vrdma-cm", "test": "cm_held", "unix_ns": time.Now().UnixNano()})
	select {}
}

// tcpConn is the TCP anchor of cmBench.
func tcpConn(args []string) error {
	if len(args) < 2 {
		return errors.New("tcpconn serve PORT | tcpconn connect ADDR PORT SECONDS | tcpconn hold ADDR PORT")
	}
	switch args[0] {
	case "serve":
		port, err := cmPort(args[1])
		if err != nil {
			return err
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("::", strconv.Itoa(int(port))))
		if err != nil {
			return err
		}
		for {
			c, err := ln.Accept()
			if err != nil {
				return err
			}
			go func() {
				// The client closes first (it holds TIME_WAIT, as a
				// dialling application does); a holder is noticed by the
				// end of its stream.
				var b [1]byte
				_, _ = c.Read(b[:])
				c.Close()
				emit(map[string]any{"source": "tcp", "test": "tcp_noticed", "unix_ns": time.Now().UnixNano()})
			}()
		}
	case "connect", "hold":
		if len(args) < 3 {
			return errors.New("tcpconn connect ADDR PORT SECONDS | tcpconn hold ADDR PORT")
		}
		port, err := cmPort(args[2])
		if err != nil {
			return err
		}
		ep := net.JoinHostPort(args[1], strconv.Itoa(int(port)))
		if args[0] == "hold" {
			c, err := net.Dial("tcp", ep)
			if err != nil {
				return err
			}
			defer c.Close()
			emit(map[string]any{"source": "tcp", "test": "tcp_held", "unix_ns": time.Now().UnixNano()})
			select {}
		}
		if len(args) < 4 {
			return errors.New("tcpconn connect ADDR PORT SECONDS")
		}
		secs, err := strconv.ParseFloat(args[3], 64)
		if err != nil {
			return err
		}
		var times []time.Duration
		start := time.Now()
		end := start.Add(time.Duration(secs * float64(time.Second)))
		for time.Now().Before(end) {
			t0 := time.Now()
			c, err := net.DialTimeout("tcp", ep, 10*time.Second)
			dt := time.Since(t0)
			if err != nil {
				return fmt.Errorf("connection %d: %w", len(times)+1, err)
			}
			// Closed with a reset, not a FIN: thousands of connections a
			// second would otherwise leave the ephemeral ports in
			// TIME_WAIT and the loop would measure their exhaustion.
			_ = c.(*net.TCPConn).SetLinger(0)
			c.Close()
			times = append(times, dt)
		}
		return emitConnTimes("tcp", times, time.Since(start))
	}
	return fmt.Errorf("tcpconn %s: serve, connect or hold", args[0])
}
