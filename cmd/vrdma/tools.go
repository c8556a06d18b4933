package main

import (
	"flag"
	"fmt"
	"io"
	"math"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/ibv"
)

// runDevices prints the adapters in ibv_devices' layout.
func runDevices(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("devices", flag.ContinueOnError)
	o := clientFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	devs, err := vrdma.Devices(*o)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "    %-16s\t   %s\n", "device", "node GUID")
	fmt.Fprintf(stdout, "    %-16s\t%s\n", "------", "----------------")
	for _, d := range devs {
		fmt.Fprintf(stdout, "    %-16s\t%016x\n", d.Name, d.GUID)
	}
	return nil
}

func guidText(g uint64) string {
	return fmt.Sprintf("%04x:%04x:%04x:%04x", g>>48, g>>32&0xffff, g>>16&0xffff, g&0xffff)
}

func mtuText(m ibv.MTU) string { return fmt.Sprintf("%d (%d)", m.Bytes(), m) }

// runDevinfo prints adapter attributes in ibv_devinfo's layout.
func runDevinfo(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("devinfo", flag.ContinueOnError)
	o := clientFlags(fs)
	name := fs.String("d", "", "only this device")
	verbose := fs.Bool("v", false, "print all attributes")
	if err := parse(fs, args); err != nil {
		return err
	}
	devs, err := vrdma.Devices(*o)
	if err != nil {
		return err
	}
	found := false
	for _, info := range devs {
		if *name != "" && info.Name != *name {
			continue
		}
		found = true
		d, err := vrdma.Open(info.Name, *o)
		if err != nil {
			return err
		}
		err = printDevinfo(stdout, d, *verbose)
		d.Close()
		if err != nil {
			return err
		}
	}
	if !found {
		return fmt.Errorf("no device %q: `vrdma devices` lists them", *name)
	}
	return nil
}

func printDevinfo(w io.Writer, d *vrdma.Device, verbose bool) error {
	a, err := d.Query()
	if err != nil {
		return err
	}
	p, err := d.QueryPort(1)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "hca_id:\t%s\n", d.Name())
	fmt.Fprintf(w, "\ttransport:\t\t\tInfiniBand (0)\n")
	fmt.Fprintf(w, "\tfw_ver:\t\t\t\t%s\n", a.FWVer)
	fmt.Fprintf(w, "\tnode_guid:\t\t\t%s\n", guidText(a.NodeGUID))
	fmt.Fprintf(w, "\tsys_image_guid:\t\t\t%s\n", guidText(a.SysImageGUID))
	fmt.Fprintf(w, "\tvendor_id:\t\t\t0x%04x\n", a.VendorID)
	fmt.Fprintf(w, "\tvendor_part_id:\t\t\t%d\n", a.VendorPartID)
	fmt.Fprintf(w, "\thw_ver:\t\t\t\t0x%X\n", a.HWVer)
	fmt.Fprintf(w, "\tphys_port_cnt:\t\t\t%d\n", a.PhysPortCnt)
	if verbose {
		fmt.Fprintf(w, "\tmax_mr_size:\t\t\t0x%x\n", a.MaxMRSize)
		fmt.Fprintf(w, "\tpage_size_cap:\t\t\t0x%x\n", a.PageSizeCap)
		fmt.Fprintf(w, "\tmax_qp:\t\t\t\t%d\n", a.MaxQP)
		fmt.Fprintf(w, "\tmax_qp_wr:\t\t\t%d\n", a.MaxQPWR)
		fmt.Fprintf(w, "\tmax_sge:\t\t\t%d\n", a.MaxSGE)
		fmt.Fprintf(w, "\tmax_cq:\t\t\t\t%d\n", a.MaxCQ)
		fmt.Fprintf(w, "\tmax_cqe:\t\t\t%d\n", a.MaxCQE)
		fmt.Fprintf(w, "\tmax_mr:\t\t\t\t%d\n", a.MaxMR)
		fmt.Fprintf(w, "\tmax_pd:\t\t\t\t%d\n", a.MaxPD)
		fmt.Fprintf(w, "\tmax_qp_rd_atom:\t\t\t%d\n", a.MaxQPRdAtom)
		fmt.Fprintf(w, "\tmax_qp_init_rd_atom:\t\t%d\n", a.MaxQPInitRdAtom)
		fmt.Fprintf(w, "\tatomic_cap:\t\t\t%s (1)\n", a.AtomicCap)
		fmt.Fprintf(w, "\tmax_srq:\t\t\t%d\n", a.MaxSRQ)
		fmt.Fprintf(w, "\tmax_srq_wr:\t\t\t%d\n", a.MaxSRQWR)
		fmt.Fprintf(w, "\tmax_srq_sge:\t\t\t%d\n", a.MaxSRQSGE)
		fmt.Fprintf(w, "\tmax_ah:\t\t\t\t%d\n", a.MaxAH)
		fmt.Fprintf(w, "\tmax_pkeys:\t\t\t%d\n", a.MaxPKeys)
		fmt.Fprintf(w, "\tmax_inline_data:\t\t%d\n", a.MaxInline)
		switch a.MaxRingBytes {
		case 0: // an older daemon
		case math.MaxUint64:
			fmt.Fprintf(w, "\tmax_ring_bytes:\t\t\tunlimited\n")
		default:
			fmt.Fprintf(w, "\tmax_ring_bytes:\t\t\t%d\n", a.MaxRingBytes)
		}
	}
	fmt.Fprintf(w, "\t\tport:\t1\n")
	fmt.Fprintf(w, "\t\t\tstate:\t\t\tPORT_%s (4)\n", p.State)
	fmt.Fprintf(w, "\t\t\tmax_mtu:\t\t%s\n", mtuText(p.MaxMTU))
	fmt.Fprintf(w, "\t\t\tactive_mtu:\t\t%s\n", mtuText(p.ActiveMTU))
	fmt.Fprintf(w, "\t\t\tsm_lid:\t\t\t0\n")
	fmt.Fprintf(w, "\t\t\tport_lid:\t\t%d\n", p.LID)
	fmt.Fprintf(w, "\t\t\tport_lmc:\t\t0x00\n")
	fmt.Fprintf(w, "\t\t\tlink_layer:\t\t%s\n", p.LinkLayer)
	if verbose {
		fmt.Fprintf(w, "\t\t\tmax_msg_sz:\t\t0x80000000\n")
		fmt.Fprintf(w, "\t\t\tgid_tbl_len:\t\t%d\n", p.GIDTblLen)
		fmt.Fprintf(w, "\t\t\tpkey_tbl_len:\t\t%d\n", p.PKeyTblLen)
		fmt.Fprintf(w, "\t\t\tphys_state:\t\t%s (5)\n", p.PhysState)
		for i, g := range p.GIDs {
			fmt.Fprintf(w, "\t\t\tGID[%3d]:\t\t%s, RoCE v2\n", i, g)
		}
	}
	fmt.Fprintln(w)
	return nil
}

// runStat prints adapter state in ibstat's layout, with port counters.
func runStat(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("stat", flag.ContinueOnError)
	o := clientFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 1 {
		return usagef("at most one device name, got %q", fs.Args())
	}
	devs, err := vrdma.Devices(*o)
	if err != nil {
		return err
	}
	found := false
	for _, info := range devs {
		if fs.NArg() == 1 && info.Name != fs.Arg(0) {
			continue
		}
		found = true
		d, err := vrdma.Open(info.Name, *o)
		if err != nil {
			return err
		}
		a, err1 := d.Query()
		p, err2 := d.QueryPort(1)
		d.Close()
		if err := firstError(err1, err2); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "CA '%s'\n", info.Name)
		fmt.Fprintf(stdout, "\tCA type: vrdma\n")
		fmt.Fprintf(stdout, "\tNumber of ports: %d\n", a.PhysPortCnt)
		fmt.Fprintf(stdout, "\tFirmware version: %s\n", a.FWVer)
		fmt.Fprintf(stdout, "\tHardware version: %d\n", a.HWVer)
		fmt.Fprintf(stdout, "\tNode GUID: 0x%016x\n", a.NodeGUID)
		fmt.Fprintf(stdout, "\tSystem image GUID: 0x%016x\n", a.SysImageGUID)
		fmt.Fprintf(stdout, "\tPort 1:\n")
		fmt.Fprintf(stdout, "\t\tState: %s\n", titleCase(p.State))
		fmt.Fprintf(stdout, "\t\tPhysical state: LinkUp\n")
		fmt.Fprintf(stdout, "\t\tRate: %s\n", p.Rate)
		fmt.Fprintf(stdout, "\t\tBase lid: %d\n", p.LID)
		fmt.Fprintf(stdout, "\t\tLMC: 0\n")
		fmt.Fprintf(stdout, "\t\tSM lid: 0\n")
		fmt.Fprintf(stdout, "\t\tCapability mask: 0x00010000\n")
		fmt.Fprintf(stdout, "\t\tPort GUID: 0x%016x\n", a.NodeGUID)
		fmt.Fprintf(stdout, "\t\tLink layer: %s\n", p.LinkLayer)
		c := p.Counters
		fmt.Fprintf(stdout, "\t\tCounters:\n")
		fmt.Fprintf(stdout, "\t\t\tport_xmit_data: %d\n", c.TxBytes)
		fmt.Fprintf(stdout, "\t\t\tport_xmit_packets: %d\n", c.TxPackets)
		fmt.Fprintf(stdout, "\t\t\tport_rcv_data: %d\n", c.RxBytes)
		fmt.Fprintf(stdout, "\t\t\tport_rcv_packets: %d\n", c.RxPackets)
		fmt.Fprintf(stdout, "\t\t\tport_xmit_errors: %d\n", c.TxErrors)
		fmt.Fprintf(stdout, "\t\t\tport_rcv_errors: %d\n", c.RxErrors)
		fmt.Fprintf(stdout, "\t\t\tport_rcv_drops: %d\n", c.RxDrops)
		fmt.Fprintf(stdout, "\t\t\trnr_nak_retry: %d\n", c.RNRNaks)
		fmt.Fprintf(stdout, "\t\t\tpath_memcpy: %d\n", c.PathMemcpy)
		fmt.Fprintf(stdout, "\t\t\tpath_rdma: %d\n", c.PathRDMA)
		fmt.Fprintf(stdout, "\t\t\tpath_tcp: %d\n", c.PathTCP)
		fmt.Fprintf(stdout, "\t\t\tlocal_ack_timeout_err: %d\n", c.AckTimeouts)
		fmt.Fprintf(stdout, "\t\t\tpacket_seq_err: %d\n", c.SeqNAKs)
		fmt.Fprintf(stdout, "\t\t\timplied_nak_seq_err: %d\n", c.ImpliedNAKs)
		fmt.Fprintf(stdout, "\t\t\tresent_packets: %d\n", c.ResentPackets)
		fmt.Fprintf(stdout, "\t\t\tpath_verbs: %d\n", c.PathVerbs)
		fmt.Fprintf(stdout, "\t\t\tverbs_bytes: %d\n", c.VerbsBytes)
		fmt.Fprintf(stdout, "\t\t\tcopy_bytes: %d\n", c.CopyBytes)
		fmt.Fprintf(stdout, "\t\t\tcopy_msgs: %d\n", c.CopyMsgs)
	}
	if !found {
		return fmt.Errorf("no device %q: `vrdma devices` lists them", fs.Arg(0))
	}
	return nil
}

func titleCase(s string) string {
	if s == "" {
		return s
	}
	b := []byte(s)
	for i := 1; i < len(b); i++ {
		if b[i] >= 'A' && b[i] <= 'Z' {
			b[i] += 'a' - 'A'
		}
	}
	return string(b)
}

func firstError(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
