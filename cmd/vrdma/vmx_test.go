package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseVMX(t *testing.T) {
	tests := []struct {
		name    string
		vmx     string
		want    vmxOptions
		wantErr string // a substring of the error; "" = no error
	}{
		{name: "empty", vmx: "", want: vmxOptions{}},
		{name: "comments and blanks", vmx: "# a VM\n\n   \n\t# indented comment\n", want: vmxOptions{}},
		{name: "a whole VM", vmx: `.encoding = "UTF-8"
config.version = "8"
displayName = "db1"
memSize = "4096"
ethernet0.present = "TRUE"
scsi0:0.fileName = "db1.vmdk"
vrdma0.present = "TRUE"
vrdma1.present = "TRUE"
vrdma0.portGroup = "storage"
vrdma1.portGroup = "storage"
vrdma1.nativeEndpointSupport = "TRUE"
vrdma.asyncMode = "TRUE"
sched.mem.pin = "TRUE"
`, want: vmxOptions{Name: "db1", Adapters: 2, PortGroup: "storage", Async: true, Native: true, Pin: true}},
		{name: "keys are case-insensitive", vmx: "DISPLAYNAME = \"x\"\nVRDMA.ASYNCMODE = \"true\"\nVrdma0.NativeEndpointSupport = \"True\"\nSCHED.MEM.PIN = \"1\"\nvRDMA0.PRESENT = \"tRuE\"\n",
			want: vmxOptions{Name: "x", Adapters: 1, Async: true, Native: true, Pin: true}},
		{name: "false and 0", vmx: "vrdma.asyncMode = \"FALSE\"\nsched.mem.pin = \"0\"\nvrdma0.nativeEndpointSupport = \"false\"\n", want: vmxOptions{}},
		{name: "the highest present adapter counts", vmx: "vrdma3.present = \"TRUE\"\nvrdma0.present = \"TRUE\"\nvrdma5.present = \"FALSE\"\n", want: vmxOptions{Adapters: 4}},
		{name: "native on any adapter", vmx: "vrdma0.nativeEndpointSupport = \"FALSE\"\nvrdma7.nativeEndpointSupport = \"TRUE\"\n", want: vmxOptions{Native: true}},
		{name: "networkName names the port group", vmx: "vrdma0.networkName = \"VM Network\"\n", want: vmxOptions{PortGroup: "VM Network"}},
		{name: "portGroup and networkName agree", vmx: "vrdma0.portGroup = \"pg\"\nvrdma1.networkName = \"pg\"\n", want: vmxOptions{PortGroup: "pg"}},
		{name: "the last displayName wins", vmx: "displayName = \"a\"\ndisplayName = \"b\"\n", want: vmxOptions{Name: "b"}},
		{name: "CRLF, a BOM and spacing", vmx: "\uFEFFdisplayName=\"w\"\r\n  vrdma0.present   =   \"TRUE\"  \r\n", want: vmxOptions{Name: "w", Adapters: 1}},
		{name: "VMware's escapes", vmx: `displayName = "a|22b|7Cc|zz"` + "\n", want: vmxOptions{Name: `a"b|c|zz`}},
		{name: "a comment after the value", vmx: "displayName = \"a\" # the name\n", want: vmxOptions{Name: "a"}},
		{name: "empty value", vmx: "displayName = \"\"\n", want: vmxOptions{}},
		{name: "unknown vrdma keys are ignored", vmx: "vrdma0.virtualDev = \"pvrdma\"\nvrdma.foo = \"bar\"\nvrdmaX.present = \"maybe\"\nvrdma-1.portGroup = \"a\"\n", want: vmxOptions{}},

		{name: "no =", vmx: "displayName = \"a\"\nvrdma0.present TRUE\n", wantErr: "line 2:"},
		{name: "unquoted value", vmx: "\n\nvrdma.asyncMode = TRUE\n", wantErr: "line 3: the value of vrdma.asyncMode is not quoted"},
		{name: "no value", vmx: "displayName =\n", wantErr: "line 1: the value of displayName is not quoted"},
		{name: "unterminated quote", vmx: "displayName = \"db1\n", wantErr: "line 1: the value of displayName has no closing quote"},
		{name: "text after the value", vmx: "displayName = \"a\" b\n", wantErr: "line 1: text after the quoted value"},
		{name: "no key", vmx: "= \"a\"\n", wantErr: "line 1:"},
		{name: "a space in the key", vmx: "display name = \"a\"\n", wantErr: "line 1: key"},
		{name: "malformed unknown key", vmx: "memSize = 4096\n", wantErr: "line 1: the value of memSize is not quoted"},
		{name: "not a boolean", vmx: "sched.mem.pin = \"yes\"\n", wantErr: `line 1: sched.mem.pin = "yes": give "TRUE" or "FALSE"`},
		{name: "not a boolean, present", vmx: "vrdma0.present = \"\"\n", wantErr: "line 1: vrdma0.present"},
		{name: "adapter 10", vmx: "vrdma10.present = \"TRUE\"\n", wantErr: "line 1: vrdma10.present: an instance has adapters vrdma0 to vrdma9"},
		{name: "adapter 01", vmx: "vrdma01.present = \"TRUE\"\n", wantErr: "line 1: vrdma01.present"},
		{name: "two port groups", vmx: "vrdma0.portGroup = \"a\"\n\nvrdma1.portGroup = \"b\"\n", wantErr: `line 3: vrdma1.portGroup = "b", but line 1 put an adapter on port group "a": an instance's adapters share one port group`},
		{name: "portGroup and networkName differ", vmx: "vrdma0.portGroup = \"a\"\nvrdma0.networkName = \"b\"\n", wantErr: "line 2:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseVMX([]byte(tt.vmx))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestReadVMX(t *testing.T) {
	dir := t.TempDir()
	if _, err := readVMX(filepath.Join(dir, "missing.vmx")); err == nil || !strings.Contains(err.Error(), "missing.vmx") {
		t.Errorf("a missing file: %v", err)
	}
	bad := filepath.Join(dir, "bad.vmx")
	if err := os.WriteFile(bad, []byte("displayName = \"a\"\nsched.mem.pin = TRUE\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readVMX(bad); err == nil || !strings.Contains(err.Error(), bad+": line 2:") {
		t.Errorf("a malformed file: %v, want the file and the line", err)
	}
	big := filepath.Join(dir, "big.vmx")
	if err := os.WriteFile(big, []byte(strings.Repeat("# padding\n", maxVMX/10+1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readVMX(big); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("a huge file: %v", err)
	}
}

// FuzzParseVMX: any text gives options or an error naming a line, never a
// panic, and the options are within what an instance can have.
func FuzzParseVMX(f *testing.F) {
	for _, s := range []string{
		"",
		"displayName = \"db1\"\nvrdma0.present = \"TRUE\"\nvrdma1.present = \"TRUE\"\n",
		"vrdma0.portGroup = \"a\"\nvrdma1.networkName = \"b\"\n",
		"vrdma.asyncMode = \"TRUE\"\nsched.mem.pin = \"1\"\nvrdma3.nativeEndpointSupport = \"true\"\n",
		"displayName = \"a|22|7c|\"\n",
		"x = \"",
		"=",
		"vrdma99999999999999999999.present = \"TRUE\"",
		"\uFEFF# c\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		o, err := parseVMX(data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "line ") {
				t.Fatalf("error %q does not name the line", err)
			}
			return
		}
		if o.Adapters < 0 || o.Adapters > 10 {
			t.Fatalf("%d adapters from %q", o.Adapters, data)
		}
	})
}
