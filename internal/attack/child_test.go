package attack

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/internal/fabric"
	"github.com/vrdma/vrdma/internal/guest/guesttest"
	"github.com/vrdma/vrdma/internal/proctest"
)

// A tenant is this test binary, re-executed as another uid, running a
// script of verbs given as arguments against the daemon in VRDMA_SOCKET
// and printing one line per verb: "VERB ARG: ok ..." or "VERB ARG: ErrX:
// message". The parent reads the lines (tenantRun).

// tenantEnv makes the test binary a tenant.
const tenantEnv = "VRDMA_ATTACK_TENANT"

func TestMain(m *testing.M) {
	if role := os.Getenv(accountEnv); role != "" {
		os.Exit(accountMain(role)) // account_test.go
	}
	if os.Getenv(tenantEnv) == "1" {
		os.Exit(tenantMain(os.Args[1:]))
	}
	code := proctest.RunInPrivateRuntimeDir(m)
	guesttest.RemoveLibrary() // what mcast_test.go and xrc_test.go built
	os.Exit(code)
}

// classes are the error classes a tenant reports, by name.
var classes = []struct {
	name string
	err  error
}{
	{"ErrPermission", vrdma.ErrPermission}, {"ErrLimit", vrdma.ErrLimit}, {"ErrNotFound", vrdma.ErrNotFound},
	{"ErrBusy", vrdma.ErrBusy}, {"ErrInvalidArgument", vrdma.ErrInvalidArgument}, {"ErrTimeout", vrdma.ErrTimeout}, {"ErrDeviceFatal", vrdma.ErrDeviceFatal}, {"ErrNoDaemon", vrdma.ErrNoDaemon},
	{"EACCES", syscall.EACCES},
}

func classOf(err error) string {
	if err == nil {
		return "ok"
	}
	for _, c := range classes {
		if errors.Is(err, c.err) {
			return c.name
		}
	}
	return "error"
}

// tenantMain runs the verbs:
//
//	create NAME [GROUP]   create an instance (in a trust group)
//	many N ADAPTERS       create instances vm00..vmN-1 of ADAPTERS adapters each
//	attach NAME           open vrdma0 of the instance
//	delete NAME           delete the instance
//	list                  the instances it sees
//	path A B              the path between adapters A and B (vrdma path)
//	cq                    create one CQ on the default instance
//	cqs                   create CQs until refused; print how many
//	sessions              open sessions until refused; print how many
//	etcd PATH             talk to an etcd through the socket at PATH
//	hold                  keep everything until stdin closes
func tenantMain(args []string) int {
	var keep []any // what the verbs created, held until the end
	var dev *vrdma.Device
	say := func(verb string, err error, extra string) {
		if err != nil {
			fmt.Printf("%s: %s: %v\n", verb, classOf(err), err)
			return
		}
		fmt.Printf("%s: ok %s\n", verb, extra)
	}
	adm, err := vrdma.DialAdmin(vrdma.Options{})
	if err != nil {
		say("dial", err, "")
		return 1
	}
	defer adm.Close()
	for i := 0; i < len(args); i++ {
		verb := args[i]
		arg := func() string {
			if i+1 < len(args) {
				i++
				return args[i]
			}
			return ""
		}
		switch verb {
		case "create":
			name := arg()
			spec := vrdma.InstanceSpec{Name: name, Adapters: 1}
			if i+1 < len(args) && strings.HasPrefix(args[i+1], "group=") {
				spec.TrustGroup = strings.TrimPrefix(arg(), "group=")
			}
			_, err := adm.CreateInstance(spec)
			say("create "+name, err, "")
		case "many":
			n, _ := strconv.Atoi(arg())
			adapters, _ := strconv.Atoi(arg())
			var err error
			for k := 0; k < n && err == nil; k++ {
				_, err = adm.CreateInstance(vrdma.InstanceSpec{Name: fmt.Sprintf("vm%02d", k), Adapters: adapters})
			}
			say("many", err, "")
		case "attach":
			name := arg()
			d, err := vrdma.Open("vrdma0", vrdma.Options{Instance: name})
			if err == nil {
				keep = append(keep, d)
			}
			say("attach "+name, err, "")
		case "delete":
			name := arg()
			say("delete "+name, adm.DeleteInstance(name), "")
		case "path":
			a, b := arg(), arg()
			p, err := adm.Path(a, b)
			say("path "+a, err, p.Kind+" "+p.HostA)
		case "list":
			insts, err := adm.Instances()
			var names []string
			for _, in := range insts {
				names = append(names, in.Name)
			}
			say("list", err, strings.Join(names, ","))
		case "cq", "cqs":
			if dev == nil {
				if dev, err = vrdma.Open("vrdma0"); err != nil {
					say(verb, err, "")
					continue
				}
			}
			n := 0
			for {
				cq, err := dev.CreateCQ(1)
				if err != nil {
					fmt.Printf("%s: %s after %d: %v\n", verb, classOf(err), n, err)
					break
				}
				keep = append(keep, cq)
				n++
				if verb == "cq" {
					say(verb, nil, "1")
					break
				}
			}
		case "sessions":
			n := 0
			for {
				a, err := vrdma.DialAdmin(vrdma.Options{})
				if err != nil {
					fmt.Printf("sessions: %s after %d: %v\n", classOf(err), n, err)
					break
				}
				keep = append(keep, a)
				n++
			}
		case "etcd":
			path := arg()
			c, err := net.Dial("unix", path)
			if err == nil {
				c.Close()
			}
			say("etcd-socket", err, "")
			st, err := fabric.Dial([]string{"unix://" + path}, nil)
			if err == nil {
				f, _ := fabric.New(st, "vrdma")
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				err = f.PutPortGroup(ctx, fabric.PortGroup{Name: "default", VLAN: 666})
				cancel()
				st.Close()
			}
			say("etcd-write", err, "")
		case "hold":
			fmt.Println("holding")
			_, _ = io.Copy(io.Discard, bufio.NewReader(os.Stdin))
		default:
			fmt.Printf("%s: unknown verb\n", verb)
			return 2
		}
	}
	_ = keep
	return 0
}

var (
	tenantBinOnce sync.Once
	tenantBin     string
	tenantBinErr  error
)

// tenantCommand returns the test binary as a tenant of uid running verbs
// against the daemon at sock. The binary sits in a directory only root may
// enter, so a copy in a world-readable one is run.
func tenantCommand(t *testing.T, uid int, sock string, verbs ...string) *exec.Cmd {
	t.Helper()
	tenantBinOnce.Do(func() {
		dir, err := os.MkdirTemp("", "vrdma-attack-")
		if err != nil {
			tenantBinErr = err
			return
		}
		if err = os.Chmod(dir, 0o755); err != nil {
			tenantBinErr = err
			return
		}
		exe, err := os.Executable()
		if err != nil {
			tenantBinErr = err
			return
		}
		b, err := os.ReadFile(exe)
		if err != nil {
			tenantBinErr = err
			return
		}
		tenantBin = filepath.Join(dir, "tenant")
		tenantBinErr = os.WriteFile(tenantBin, b, 0o755)
	})
	if tenantBinErr != nil {
		t.Fatal(tenantBinErr)
	}
	cmd := exec.Command(tenantBin, verbs...)
	cmd.Dir = filepath.Dir(tenantBin)
	cmd.Env = append(os.Environ(), tenantEnv+"=1", "VRDMA_SOCKET="+sock)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	return cmd
}

// tenantRun runs a tenant to its end and returns its lines by verb.
func tenantRun(t *testing.T, uid int, sock string, verbs ...string) map[string]string {
	t.Helper()
	out, err := tenantCommand(t, uid, sock, verbs...).CombinedOutput()
	if err != nil {
		t.Fatalf("tenant %d %v: %v\n%s", uid, verbs, err, out)
	}
	return lines(string(out))
}

// lines splits a tenant's output into "VERB ARG" -> the rest.
func lines(out string) map[string]string {
	m := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(l, ": "); ok {
			m[k] = v
		}
	}
	return m
}
