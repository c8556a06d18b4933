package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/vrdma/vrdma/internal/daemon"
)

// Instance options in VMware's .vmx form, so that `vrdma vm create --file`
// takes the lines a VM's configuration already has:
//
//	displayName = "db1"
//	vrdma0.present = "TRUE"
//	vrdma1.present = "TRUE"
//	vrdma0.portGroup = "storage"
//	vrdma0.nativeEndpointSupport = "TRUE"
//	vrdma.asyncMode = "TRUE"
//	sched.mem.pin = "TRUE"
//
// Every line is `key = "value"`, a # comment or blank. Keys are
// case-insensitive; the ones above are read, the many others a .vmx has
// are ignored. Values are quoted, with VMware's |XX escapes.

// vmxOptions are the instance options a .vmx gives.
type vmxOptions struct {
	Name      string // displayName
	Adapters  int    // the highest vrdmaN.present N + 1; 0 when none is present
	PortGroup string // vrdmaN.portGroup or vrdmaN.networkName
	Async     bool   // vrdma.asyncMode
	Native    bool   // any vrdmaN.nativeEndpointSupport
	Pin       bool   // sched.mem.pin
}

// maxVMX bounds the file read: a .vmx is a few kilobytes.
const maxVMX = 1 << 20

// readVMX reads the options of the .vmx at path.
func readVMX(path string) (vmxOptions, error) {
	f, err := os.Open(path)
	if err != nil {
		return vmxOptions{}, err
	}
	defer f.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(io.LimitReader(f, maxVMX+1)); err != nil {
		return vmxOptions{}, fmt.Errorf("%s: %w", path, err)
	}
	if b.Len() > maxVMX {
		return vmxOptions{}, fmt.Errorf("%s: larger than %d bytes: is it a .vmx?", path, maxVMX)
	}
	o, err := parseVMX(b.Bytes())
	if err != nil {
		return o, fmt.Errorf("%s: %w", path, err)
	}
	return o, nil
}

// parseVMX reads the options of a .vmx's text. Errors name the line.
func parseVMX(data []byte) (vmxOptions, error) {
	var o vmxOptions
	pgLine := 0 // the line that set o.PortGroup
	text := strings.TrimPrefix(string(data), "\uFEFF")
	for i, line := range strings.Split(text, "\n") {
		n := i + 1
		key, val, ok, err := splitVMXLine(line)
		if err != nil {
			return o, fmt.Errorf("line %d: %w", n, err)
		}
		if !ok {
			continue
		}
		switch k := strings.ToLower(key); k {
		case "displayname":
			o.Name = val
		case "vrdma.asyncmode":
			if o.Async, err = vmxBool(key, val); err != nil {
				return o, fmt.Errorf("line %d: %w", n, err)
			}
		case "sched.mem.pin":
			if o.Pin, err = vmxBool(key, val); err != nil {
				return o, fmt.Errorf("line %d: %w", n, err)
			}
		default:
			idx, field, isAdapter := vmxAdapterKey(k)
			if !isAdapter {
				continue // one of the many keys vrdma has no use for
			}
			if idx < 0 {
				return o, fmt.Errorf("line %d: %s: an instance has adapters vrdma0 to vrdma%d", n, key, daemon.MaxAdapters-1)
			}
			switch field {
			case "present":
				present, err := vmxBool(key, val)
				if err != nil {
					return o, fmt.Errorf("line %d: %w", n, err)
				}
				if present && idx+1 > o.Adapters {
					o.Adapters = idx + 1
				}
			case "nativeendpointsupport":
				native, err := vmxBool(key, val)
				if err != nil {
					return o, fmt.Errorf("line %d: %w", n, err)
				}
				o.Native = o.Native || native
			case "portgroup", "networkname":
				if pgLine != 0 && val != o.PortGroup {
					return o, fmt.Errorf("line %d: %s = %q, but line %d put an adapter on port group %q: an instance's adapters share one port group; create one instance per port group", n, key, val, pgLine, o.PortGroup)
				}
				o.PortGroup, pgLine = val, n
			}
		}
	}
	return o, nil
}

// splitVMXLine splits `key = "value"`; ok is false for a blank line or a
// comment.
func splitVMXLine(line string) (key, val string, ok bool, err error) {
	line = strings.TrimSpace(line)
	if line == "" || line[0] == '#' {
		return "", "", false, nil
	}
	key, rest, found := strings.Cut(line, "=")
	if !found {
		return "", "", false, fmt.Errorf("%q is not key = \"value\"", clip(line))
	}
	key, rest = strings.TrimSpace(key), strings.TrimSpace(rest)
	switch {
	case key == "":
		return "", "", false, fmt.Errorf("%q has no key before the =", clip(line))
	case strings.ContainsAny(key, " \t\""):
		return "", "", false, fmt.Errorf("key %q contains a space or a quote", clip(key))
	case rest == "" || rest[0] != '"':
		return "", "", false, fmt.Errorf("the value of %s is not quoted: write %s = \"%s\"", key, key, clip(rest))
	}
	end := strings.IndexByte(rest[1:], '"')
	if end < 0 {
		return "", "", false, fmt.Errorf("the value of %s has no closing quote", key)
	}
	if tail := strings.TrimSpace(rest[end+2:]); tail != "" && tail[0] != '#' {
		return "", "", false, fmt.Errorf("text after the quoted value of %s: %q", key, clip(tail))
	}
	return key, unescapeVMX(rest[1 : end+1]), true, nil
}

// vmxAdapterKey splits a lower-cased "vrdmaN.field" vrdma reads; idx is
// -1 when N is not an adapter's index (vrdma10, vrdma01).
func vmxAdapterKey(k string) (idx int, field string, ok bool) {
	dev, field, found := strings.Cut(k, ".")
	digits, isVRDMA := strings.CutPrefix(dev, "vrdma")
	if !found || !isVRDMA || digits == "" || strings.Trim(digits, "0123456789") != "" {
		return 0, "", false
	}
	switch field {
	case "present", "nativeendpointsupport", "portgroup", "networkname":
	default:
		return 0, "", false
	}
	n, err := strconv.Atoi(digits)
	if err != nil || digits != strconv.Itoa(n) || n >= daemon.MaxAdapters {
		return -1, field, true
	}
	return n, field, true
}

// vmxBool reads VMware's booleans: TRUE or FALSE in any case, or 1 or 0.
func vmxBool(key, val string) (bool, error) {
	switch strings.ToLower(val) {
	case "true", "1":
		return true, nil
	case "false", "0":
		return false, nil
	}
	return false, fmt.Errorf("%s = %q: give \"TRUE\" or \"FALSE\"", key, clip(val))
}

// unescapeVMX decodes VMware's |XX escapes (|22 is a quote, |7C a bar);
// anything else stays as it is.
func unescapeVMX(s string) string {
	if !strings.Contains(s, "|") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '|' && i+2 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil {
				b.WriteByte(byte(v))
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// clip shortens text quoted in an error.
func clip(s string) string {
	if len(s) > 60 {
		return s[:60] + "..."
	}
	return s
}
