package guest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/vrdma/vrdma/internal/guest/abiheader"
)

const abiHeaderPath = "csrc/vrdma_abi.h"

func generated(t *testing.T) []byte {
	t.Helper()
	b, err := abiheader.Generate()
	if err != nil {
		t.Fatalf("abiheader.Generate: %v", err)
	}
	return b
}

// TestABIHeaderUpToDate fails when csrc/vrdma_abi.h is not what the Go
// definitions of internal/abi and internal/proto generate.
func TestABIHeaderUpToDate(t *testing.T) {
	want := generated(t)
	got, err := os.ReadFile(abiHeaderPath)
	if err != nil {
		t.Fatalf("%v: run go generate ./internal/guest", err)
	}
	if bytes.Equal(got, want) {
		return
	}
	gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := 0; i < max(len(gl), len(wl)); i++ {
		var g, w string
		if i < len(gl) {
			g = gl[i]
		}
		if i < len(wl) {
			w = wl[i]
		}
		if g != w {
			t.Fatalf("%s is stale: run go generate ./internal/guest\nline %d is\n\t%s\nand the Go definitions give\n\t%s",
				abiHeaderPath, i+1, g, w)
		}
	}
}

// contractNames are the names the C sources rely on (the plan's contract).
var contractNames = strings.Fields(`
	VRDMA_RING_HEADER_SIZE VRDMA_RING_PROD_OFF VRDMA_RING_CONS_OFF VRDMA_RING_NOTIFY_OFF
	VRDMA_RING_ERR_OFF VRDMA_RING_HELD_OFF VRDMA_RING_ERR_OVERRUN VRDMA_RING_ERR_CORRUPT
	VRDMA_QP_STATE_OFF VRDMA_SQ_DONE_OFF VRDMA_QP_REVOKE_OFF VRDMA_QP_DIRECT_BUSY_OFF
	VRDMA_SEND_WQE_HEADER VRDMA_RECV_WQE_HEADER VRDMA_SGE_SIZE VRDMA_CQE_SIZE
	VRDMA_MAX_RING_ENTRIES VRDMA_MAX_SGE VRDMA_GRH_SIZE
	VRDMA_SWQE_WR_ID VRDMA_SWQE_OPCODE VRDMA_SWQE_FLAGS VRDMA_SWQE_NUM_SGE
	VRDMA_SWQE_IMM VRDMA_SWQE_REMOTE_ADDR VRDMA_SWQE_RKEY VRDMA_SWQE_INLINE_LEN
	VRDMA_SWQE_COMPARE_ADD VRDMA_SWQE_SWAP VRDMA_SWQE_AH VRDMA_SWQE_REMOTE_QPN VRDMA_SWQE_REMOTE_QKEY
	VRDMA_RWQE_WR_ID VRDMA_RWQE_NUM_SGE VRDMA_SGE_ADDR VRDMA_SGE_LENGTH VRDMA_SGE_LKEY
	VRDMA_CQE_WR_ID VRDMA_CQE_QP_NUM VRDMA_CQE_BYTE_LEN VRDMA_CQE_IMM VRDMA_CQE_SRC_QP
	VRDMA_CQE_OPCODE VRDMA_CQE_STATUS VRDMA_CQE_FLAGS VRDMA_CQE_PKEY_INDEX
	VRDMA_SEND_FENCE VRDMA_SEND_SIGNALED VRDMA_SEND_SOLICITED VRDMA_SEND_INLINE
	VRDMA_WC_WITH_GRH VRDMA_WC_WITH_IMM
	VRDMA_PROTO_VERSION VRDMA_PROTO_HEADER_SIZE VRDMA_PROTO_MAX_MESSAGE VRDMA_PROTO_MAX_FDS
	VRDMA_PROTO_MAGIC VRDMA_KIND_REQUEST VRDMA_KIND_REPLY VRDMA_KIND_EVENT
	VRDMA_CMD_HELLO VRDMA_CMD_QUERY_DEVICE VRDMA_CMD_QUERY_PORT VRDMA_CMD_ALLOC_PD VRDMA_CMD_DEALLOC_PD
	VRDMA_CMD_REG_MR VRDMA_CMD_DEREG_MR VRDMA_CMD_CREATE_CQ VRDMA_CMD_DESTROY_CQ VRDMA_CMD_CREATE_QP
	VRDMA_CMD_MODIFY_QP VRDMA_CMD_QUERY_QP VRDMA_CMD_DESTROY_QP VRDMA_CMD_CREATE_SRQ
	VRDMA_CMD_DESTROY_SRQ VRDMA_CMD_CREATE_AH VRDMA_CMD_DESTROY_AH VRDMA_CMD_EVENT VRDMA_CMD_MAP_MR
	VRDMA_CMD_CM_LISTEN VRDMA_CMD_CM_CONNECT VRDMA_CMD_CM_ACCEPT VRDMA_CMD_CM_REJECT
	VRDMA_CMD_CM_DISCONNECT VRDMA_CMD_CM_EVENT
	VRDMA_CODE_OK VRDMA_CODE_INVALID VRDMA_CODE_NOT_FOUND VRDMA_CODE_LIMIT VRDMA_CODE_BUSY
	VRDMA_CODE_STATE VRDMA_CODE_MEMLOCK VRDMA_CODE_PERMISSION VRDMA_CODE_VERSION
	VRDMA_CODE_INTERNAL VRDMA_CODE_ATTR
`)

var defineRE = regexp.MustCompile(`(?m)^#define (VRDMA_[A-Z0-9_]+) `)

// TestABIHeaderContract checks that the header defines every name of the
// contract and checks the libibverbs enumerators the library passes through.
func TestABIHeaderContract(t *testing.T) {
	h := string(generated(t))
	defined := map[string]bool{}
	for _, m := range defineRE.FindAllStringSubmatch(h, -1) {
		defined[m[1]] = true
	}
	for _, name := range contractNames {
		if !defined[name] {
			t.Errorf("%s is not defined", name)
		}
	}
	for _, c := range []string{
		"IBV_WR_RDMA_WRITE == 0", "IBV_WR_ATOMIC_FETCH_AND_ADD == 6",
		"IBV_WC_SEND == 0", "IBV_WC_FETCH_ADD == 4", "IBV_WC_RECV == 128", "IBV_WC_RECV_RDMA_WITH_IMM == 129",
		"IBV_WC_SUCCESS == 0", "IBV_WC_REM_ACCESS_ERR == 10", "IBV_WC_GENERAL_ERR == 21",
		"IBV_ACCESS_LOCAL_WRITE == 1", "IBV_ACCESS_REMOTE_ATOMIC == 8",
		"IBV_QPT_RC == 2", "IBV_QPT_UD == 4", "IBV_QPS_RESET == 0", "IBV_QPS_ERR == 6",
		"IBV_EVENT_CQ_ERR == 0", "IBV_EVENT_GID_CHANGE == 18", "IBV_MTU_256 == 1", "IBV_MTU_4096 == 5",
		"IBV_SEND_FENCE == 1", "IBV_SEND_INLINE == 8", "IBV_WC_GRH == 1", "IBV_WC_WITH_IMM == 2",
	} {
		if !strings.Contains(h, "_Static_assert("+c+",") {
			t.Errorf("no check that %s", c)
		}
	}
	if i, j := strings.Index(h, "#ifdef "+abiheader.VerbsGuard), strings.Index(h, "_Static_assert"); i < 0 || j < i {
		t.Errorf("the checks are not inside #ifdef %s", abiheader.VerbsGuard)
	}
}

// headerCFlags are those of the library's build that matter to a header.
var headerCFlags = []string{"-std=c11", "-Wall", "-Wextra", "-Werror", "-c"}

// compileC compiles src with the header next to it; it returns the
// compiler's output and whether it succeeded.
func compileC(t *testing.T, header []byte, src string) (string, bool) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "vrdma_abi.h"), header, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "t.c"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	args := append(append([]string(nil), headerCFlags...), "-o", filepath.Join(dir, "t.o"), filepath.Join(dir, "t.c"))
	out, err := exec.Command("cc", args...).CombinedOutput()
	return string(out), err == nil
}

// needCC skips the test unless a C compiler and, with verbs, rdma-core's
// <infiniband/verbs.h> are installed.
func needCC(t *testing.T, verbs bool) {
	t.Helper()
	if _, err := exec.LookPath("cc"); err != nil {
		t.Skip("no C compiler (cc): install the Debian package gcc")
	}
	if !verbs {
		return
	}
	if out, ok := compileC(t, nil, "#include <infiniband/verbs.h>\n"); !ok {
		t.Skipf("cannot include <infiniband/verbs.h>: install the Debian package libibverbs-dev\n%s", out)
	}
}

// useAll is a C translation unit that uses every #define of h as an integer
// constant expression.
func useAll(h string) string {
	var b strings.Builder
	b.WriteString("static const unsigned long long vrdma_abi_values[] = {\n")
	for _, m := range defineRE.FindAllStringSubmatch(h, -1) {
		b.WriteString("\t" + m[1] + ",\n")
	}
	b.WriteString("};\nunsigned long long vrdma_abi_value(unsigned i);\n" +
		"unsigned long long vrdma_abi_value(unsigned i) { return vrdma_abi_values[i % (sizeof vrdma_abi_values / sizeof vrdma_abi_values[0])]; }\n")
	return b.String()
}

// TestABIHeaderCompiles compiles the header with the library's warnings as
// errors, on its own and after <infiniband/verbs.h> (which enables the
// enumeration checks), twice each to check the include guard.
func TestABIHeaderCompiles(t *testing.T) {
	h := generated(t)
	t.Run("alone", func(t *testing.T) {
		needCC(t, false)
		src := "#include \"vrdma_abi.h\"\n#include \"vrdma_abi.h\"\n" + useAll(string(h))
		if out, ok := compileC(t, h, src); !ok {
			t.Fatalf("cc %s: the header does not compile:\n%s", strings.Join(headerCFlags, " "), out)
		}
	})
	t.Run("after verbs.h", func(t *testing.T) {
		needCC(t, true)
		src := "#include <infiniband/verbs.h>\n#include \"vrdma_abi.h\"\n#include \"vrdma_abi.h\"\n" + useAll(string(h))
		if out, ok := compileC(t, h, src); !ok {
			t.Fatalf("cc %s: the header does not compile after <infiniband/verbs.h>:\n%s", strings.Join(headerCFlags, " "), out)
		}
	})
}

// TestABIHeaderChecksBite shows the enumeration checks are compiled after
// <infiniband/verbs.h>: a header claiming a wrong value does not compile.
func TestABIHeaderChecksBite(t *testing.T) {
	needCC(t, true)
	h := string(generated(t))
	const right, wrong = "_Static_assert(IBV_WR_SEND == 2,", "_Static_assert(IBV_WR_SEND == 3,"
	if !strings.Contains(h, right) {
		t.Fatalf("the header has no %q", right)
	}
	bad := strings.Replace(h, right, wrong, 1)
	out, ok := compileC(t, []byte(bad), "#include <infiniband/verbs.h>\n#include \"vrdma_abi.h\"\n")
	if ok {
		t.Fatalf("a header asserting IBV_WR_SEND == 3 compiled: the checks are not active (is %s the guard of verbs.h?)", abiheader.VerbsGuard)
	}
	if !strings.Contains(out, "IBV_WR_SEND is 2") {
		t.Errorf("the compiler failed without naming the check:\n%s", out)
	}
	// Without verbs.h the checks are skipped, so the same header compiles.
	if out, ok := compileC(t, []byte(bad), "#include \"vrdma_abi.h\"\nint vrdma_abi_unused;\n"); !ok {
		t.Errorf("the checks are compiled without <infiniband/verbs.h>:\n%s", out)
	}
}
