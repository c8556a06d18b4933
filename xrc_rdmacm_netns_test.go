package vrdma_test

// XRC through rdma_cm between two namespace hosts: Debian's unmodified
// rdma_xserver and rdma_xclient with -c x (RDMA_PS_IB, an XRC_SEND QP
// dialling, an XRC_RECV QP and an XRC SRQ answering) through the guest
// libraries, over RoCEv2 (Soft-RoCE links) and over the TCP channel. On
// RoCEv2 a capture of the veth shows the connection manager's XRC REQ and
// REP, as Linux's CM sends them, and the XRC SEND to the SRQ number the
// reply carried. Needs root, rdmacm-utils, tcpdump and tshark (the capture
// check is skipped without the last two).

import (
	"context"
	"encoding/hex"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/guest/guesttest"
	"github.com/vrdma/vrdma/internal/netns"
)

func TestXRCRdmaCMBetweenHosts(t *testing.T) {
	netns.Require(t)
	guesttest.RequirePrograms(t, "ibv_devinfo", "rdma_xserver", "rdma_xclient")
	lib := guesttest.Library(t)
	for _, mode := range []struct {
		name  string
		links bool
		path  string
	}{
		{"RoCEv2", true, "rdma"},
		{"TCP channel", false, "tcp"},
	} {
		t.Run(mode.name, func(t *testing.T) {
			a, b := twoToolHosts(t, lib, mode.links, mode.path)
			var pcapPath string
			var stop func()
			if mode.links && haveCaptureTools() {
				pcapPath = filepath.Join(t.TempDir(), "xrc-cm.pcap")
				stop = captureRoCE(t, a.sw.h.NS, a.sw.h.Iface, pcapPath)
			}
			ba, bb := pathsOf(t, a.dev), pathsOf(t, b.dev)
			server, client := runServerClient(t, a, b, "rdma_xserver", []string{"-p", "7471", "-c", "x"},
				"rdma_xclient", []string{"-s", a.sw.h.IPv4.String(), "-p", "7471", "-c", "x"})
			for side, out := range map[string]string{"rdma_xserver": server, "rdma_xclient": client} {
				if !strings.Contains(out, "end 0") {
					t.Errorf("%s did not succeed:\n%s", side, out)
				}
			}
			da, db := pathDelta(ba, pathsOf(t, a.dev)), pathDelta(bb, pathsOf(t, b.dev))
			// The client sends (the REQ, the RTU and its message); the
			// server answers with acknowledgements, which the counters do
			// not count: nothing of it goes by another path.
			if took, others := db.by(mode.path); took == 0 || others != 0 {
				t.Errorf("host b (client)'s path counters moved by %+v: want messages by %s only", db, mode.path)
			}
			if _, others := da.by(mode.path); others != 0 {
				t.Errorf("host a (server)'s path counters moved by %+v: want messages by %s only", da, mode.path)
			}
			if stop == nil {
				return
			}
			stop()
			checkXRCCMCapture(t, pcapPath, b.sw.h.IPv4.String())
		})
	}
}

// checkXRCCMCapture has tshark read the capture: the REQ (from client, a
// CM MAD on QP1) is XRC's — transport service type 3, extended transport
// type 1, a service ID in RDMA_PS_IB (0x3f) — and the REP an XRC
// target's — Local QPN 0, its QPN as the Local EE Context Number, SRQ set;
// the client's one message is an XRC SEND Only (opcode 0xa4) whose XRCETH
// (undissected by Wireshark 4.0: the start of infiniband.vendor) is the
// SRQ number rdma_xserver put at the front of the REP's private data; and
// the XRC target acknowledges it (0xb1).
func checkXRCCMCapture(t *testing.T, path, client string) {
	t.Helper()
	fields := []string{"ip.src", "infiniband.bth.opcode",
		"infiniband.cm.req.transpsvctype", "infiniband.cm.req.ext_transport", "infiniband.cm.req.serviceid.protocol",
		"infiniband.cm.rep.localqpn", "infiniband.cm.rep.localeecn", "infiniband.cm.rep.srq", "infiniband.cm.rep.private",
		"infiniband.vendor"}
	args := []string{"-r", path, "-n", "--disable-protocol", "rpcordma", "-T", "fields", "-E", "separator=/t", "-E", "occurrence=l"}
	for _, f := range fields {
		args = append(args, "-e", f)
	}
	out, err := exec.Command("tshark", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("tshark: %v\n%s", err, out)
	}
	var reqs, reps, acks int
	var srqn string
	var sends []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "\t")
		if len(f) < len(fields) {
			continue
		}
		src, op, tst, ext, ps, repQPN, repEECN, repSRQ, repPriv, vendor := f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7], f[8], f[9]
		switch {
		case tst != "":
			reqs++
			if src != client || num(tst) != 3 || num(ext) != 1 || num(ps) != 0x3f {
				t.Errorf("a REQ from %s: transport service type %s, extended transport %s, port space %s; want from %s, 3, 1, 0x3f (RDMA_PS_IB)", src, tst, ext, ps, client)
			}
		case repEECN != "":
			reps++
			priv := strings.ReplaceAll(repPriv, ":", "")
			if num(repEECN) == 0 || num(repQPN) != 0 || num(repSRQ) != 1 || len(priv) < 8 {
				t.Errorf("a REP: Local QPN %s, Local EE Context Number %s, SRQ %s, private data %q; want 0, the target's QPN, set, the SRQ number first", repQPN, repEECN, repSRQ, repPriv)
				continue
			}
			srqn = priv[:8]
		case op == "164": // XRC SEND Only
			if src != client {
				t.Errorf("an XRC SEND from %s: want the client's (%s) only", src, client)
			}
			sends = append(sends, strings.ReplaceAll(vendor, ":", ""))
		case op == "177": // XRC Acknowledge
			acks++
		case op != "" && op >= "160" && op < "184" && len(op) == 3:
			t.Errorf("XRC opcode %s from %s: want one SEND Only and its acknowledgement", op, src)
		}
	}
	if reqs == 0 || reps == 0 {
		all, _ := exec.Command("tshark", "-r", path, "-n").CombinedOutput()
		t.Fatalf("the capture holds %d XRC REQs and %d XRC REPs, want at least one each:\n%s\nthe capture:\n%s", reqs, reps, out, all)
	}
	if srqn == "" {
		t.Fatalf("no REP carried an SRQ number:\n%s", out)
	}
	if len(sends) == 0 {
		t.Fatalf("the capture holds no XRC SEND Only:\n%s", out)
	}
	for _, s := range sends {
		if !strings.HasPrefix(s, srqn) {
			t.Errorf("an XRC SEND carries %q after its BTH: want the XRCETH %s, the SRQ number of the REP's private data", s[:min(len(s), 16)], srqn)
		}
	}
	if acks == 0 {
		t.Error("the capture holds no XRC Acknowledge")
	}
	if b, err := hex.DecodeString(srqn); err != nil || b[0] != 0 {
		t.Errorf("the REP's SRQ number %q is not a 24-bit number: %v", srqn, err)
	}
	t.Logf("capture: %d XRC REQ, %d XRC REP (SRQ number %s), %d XRC SEND Only to it, %d XRC Acknowledges", reqs, reps, srqn, len(sends), acks)
}

// num is a number tshark printed (decimal, or hex with 0x); ^0 if none.
func num(s string) uint64 {
	n, err := strconv.ParseUint(s, 0, 64)
	if err != nil {
		return ^uint64(0)
	}
	return n
}

// runServerClient runs an rdma_cm server program on a and its client, a
// program of another name, on b, once the server listens (the library
// says so on stderr: VRDMA_DEBUG); both must exit 0 within 30 s. It
// returns what each printed.
func runServerClient(t *testing.T, a, b *toolHost, server string, serverArgs []string, client string, clientArgs []string) (sout, cout string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	sbuf, done, err := startListener(ctx, t, a, server, serverArgs)
	if err != nil {
		t.Fatal(err)
	}
	out, err := b.prog.Command(ctx, client, clientArgs...).CombinedOutput()
	if err != nil {
		cancel()
		<-done
		t.Fatalf("%s on b: %v\n%s\nserver:\n%s", client, err, out, sbuf.String())
	}
	if err := <-done; err != nil {
		t.Fatalf("%s on a: %v\n%s\nclient:\n%s", server, err, sbuf.String(), out)
	}
	return sbuf.String(), string(out)
}
