package guest

import (
	"debug/elf"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// functionTable is the documentation's table of the library's functions.
const functionTable = "../../docs/guest-functions.md"

// functionTableName is how messages name it.
const functionTableName = "docs/guest-functions.md"

// guestLibraries are the libraries a build makes, with their version
// scripts and the heading of their table in docs/guest-functions.md ("":
// the first table).
var guestLibraries = []struct {
	soname, script, heading string
}{
	{SOName, VersionScript, ""},
	{RDMACMSOName, RDMACMVersionScript, "## librdmacm.so.1"},
}

// TestExportsMatchTheVersionScript builds the real libraries and checks, in
// each one's dynamic symbol table, that every function of its version
// script is defined under its version, and that nothing else is exported.
func TestExportsMatchTheVersionScript(t *testing.T) {
	dir, err := Build(t.TempDir())
	var missing *MissingToolsError
	if errors.As(err, &missing) {
		t.Skipf("cannot build the library here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, lib := range guestLibraries {
		t.Run(lib.soname, func(t *testing.T) { checkExports(t, filepath.Join(dir, lib.soname), lib.script) })
	}
}

// checkExports checks the library at path against its version script.
func checkExports(t *testing.T, path, scriptName string) {
	script, err := fs.ReadFile(Sources(), scriptName)
	if err != nil {
		t.Fatal(err)
	}
	want, err := parseVersionScript(string(script))
	if err != nil {
		t.Fatalf("%s: %v", scriptName, err)
	}
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.DynamicSymbols()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{} // defined function or object -> version
	for _, s := range syms {
		typ := elf.ST_TYPE(s.Info)
		if s.Section == elf.SHN_UNDEF || s.Section == elf.SHN_ABS || (typ != elf.STT_FUNC && typ != elf.STT_OBJECT) {
			continue // imports, and the version nodes' own symbols
		}
		got[s.Name] = s.Version
	}
	for _, name := range sortedKeys(want) {
		v, ok := got[name]
		switch {
		case !ok:
			t.Errorf("%s (%s in %s) is not defined in the library: write it (a stub in stubs.c if nothing calls it), marked VRDMA_EXPORT",
				name, want[name], scriptName)
		case v != want[name]:
			t.Errorf("%s has version %q, want %s (%s)", name, v, want[name], scriptName)
		}
	}
	for _, name := range sortedKeys(got) {
		if _, ok := want[name]; !ok {
			t.Errorf("%s is exported but not in %s: add it to its version node, or do not mark it VRDMA_EXPORT", name, scriptName)
		}
	}
}

// TestFunctionTableMatchesTheVersionScript checks docs/guest-functions.md,
// the tables of the libraries' functions users read, against the version
// scripts: a row for every exported function, with its version, and no row
// for anything else.
func TestFunctionTableMatchesTheVersionScript(t *testing.T) {
	doc, err := os.ReadFile(functionTable)
	if err != nil {
		t.Fatal(err)
	}
	for _, lib := range guestLibraries {
		t.Run(lib.soname, func(t *testing.T) { checkFunctionTable(t, string(doc), lib.script, lib.heading) })
	}
}

// checkFunctionTable checks the table after heading against VersionScript.
func checkFunctionTable(t *testing.T, doc, scriptName, heading string) {
	script, err := fs.ReadFile(Sources(), scriptName)
	if err != nil {
		t.Fatal(err)
	}
	exported, err := parseVersionScript(string(script))
	if err != nil {
		t.Fatalf("%s: %v", scriptName, err)
	}
	rows, err := parseFunctionTableAfter(doc, heading)
	if err != nil {
		t.Fatalf("%s: %v", functionTableName, err)
	}
	seen := map[string]bool{}
	for _, r := range rows {
		if seen[r.name] {
			t.Errorf("%s:%d: a second row for %s", functionTableName, r.line, r.name)
		}
		seen[r.name] = true
		v, ok := exported[r.name]
		switch {
		case !ok:
			t.Errorf("%s:%d: %s is not exported (it is not in csrc/%s): remove its row, or export it", functionTableName, r.line, r.name, scriptName)
		case r.version != v:
			t.Errorf("%s:%d: %s's version is %q in the table but %s in csrc/%s", functionTableName, r.line, r.name, r.version, v, scriptName)
		}
		if r.status == "" {
			t.Errorf("%s:%d: %s has no status (implemented, EOPNOTSUPP, private ABI: stub)", functionTableName, r.line, r.name)
		}
	}
	for _, name := range sortedKeys(exported) {
		if !seen[name] {
			t.Errorf("%s (%s in csrc/%s) has no row in %s: add one saying what the library does with it", name, exported[name], scriptName, functionTableName)
		}
	}
}

func TestParseVersionScript(t *testing.T) {
	got, err := parseVersionScript(`/* a comment { with } braces; */
A_1.0 {
	global:
		f; g;
	local: *;
};
A_1.1 { global: h; /* one more */ } A_1.0;
A_2 {
	i;
} A_1.1;
`)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"f": "A_1.0", "g": "A_1.0", "h": "A_1.1", "i": "A_2"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for _, bad := range []string{
		"A { f; ",             // unterminated node
		"A { f; }; B { f; };", // a symbol in two nodes
		"A { global: f };",    // no semicolon
		"{ f; };",             // no node name
		"A { f; } B; /* x",    // unterminated comment
		"A { local: f*; };",   // a local pattern other than *
		"A { global: f; }; }", // a stray brace
	} {
		if _, err := parseVersionScript(bad); err == nil {
			t.Errorf("parseVersionScript(%q) accepted it", bad)
		}
	}
}

func TestParseFunctionTable(t *testing.T) {
	rows, err := parseFunctionTable("# T\n\ntext | with a bar\n\n| function | version | status | notes |\n|---|---|---|---|\n" +
		"| `f` | V_1 | implemented |  |\n| `g` | V_2 | EOPNOTSUPP | no \\| bar |\n\nafter\n")
	if err != nil {
		t.Fatal(err)
	}
	want := []functionRow{{"f", "V_1", "implemented", 7}, {"g", "V_2", "EOPNOTSUPP", 8}}
	if !slices.Equal(rows, want) {
		t.Errorf("got %+v, want %+v", rows, want)
	}
	for _, bad := range []string{
		"no table at all\n",
		"| function | version | status | notes |\n|---|---|---|---|\n| f | V | implemented | |\n", // name not in backquotes
		"| function | version | status | notes |\n|---|---|---|---|\n| `f` | V |\n",               // too few cells
	} {
		if _, err := parseFunctionTable(bad); err == nil {
			t.Errorf("parseFunctionTable(%q) accepted it", bad)
		}
	}
}

// parseVersionScript returns the global symbols of a GNU ld version script
// by version node. It reads what libibverbs.map uses: nodes with global:
// and local: sections (local only "*"), optional parent nodes, comments.
func parseVersionScript(text string) (map[string]string, error) {
	var b strings.Builder
	for {
		i := strings.Index(text, "/*")
		if i < 0 {
			b.WriteString(text)
			break
		}
		j := strings.Index(text[i+2:], "*/")
		if j < 0 {
			return nil, errors.New("a comment does not end")
		}
		b.WriteString(text[:i])
		b.WriteString(" ")
		text = text[i+2+j+2:]
	}
	toks := regexp.MustCompile(`[{};:]|[^\s{};:]+`).FindAllString(b.String(), -1)
	syms := map[string]string{}
	for i := 0; i < len(toks); {
		node := toks[i]
		if strings.ContainsAny(node, "{};:") || i+1 >= len(toks) || toks[i+1] != "{" {
			return nil, fmt.Errorf("expected a version node's name and {, found %q", strings.Join(toks[i:min(i+2, len(toks))], " "))
		}
		i += 2
		local := false
		for {
			if i >= len(toks) {
				return nil, fmt.Errorf("node %s does not end", node)
			}
			tok := toks[i]
			if tok == "}" {
				i++
				break
			}
			if (tok == "global" || tok == "local") && i+1 < len(toks) && toks[i+1] == ":" {
				local = tok == "local"
				i += 2
				continue
			}
			if i+1 >= len(toks) || toks[i+1] != ";" || strings.ContainsAny(tok, "{}:") {
				return nil, fmt.Errorf("node %s: expected a symbol and ;, found %q", node, tok)
			}
			i += 2
			if local {
				if tok != "*" {
					return nil, fmt.Errorf("node %s: a local pattern other than *: %q", node, tok)
				}
				continue
			}
			if prev, ok := syms[tok]; ok {
				return nil, fmt.Errorf("%s is in node %s and in node %s", tok, prev, node)
			}
			syms[tok] = node
		}
		if i < len(toks) && toks[i] != ";" { // a parent node
			i++
		}
		if i >= len(toks) || toks[i] != ";" {
			return nil, fmt.Errorf("node %s does not end with ;", node)
		}
		i++
	}
	return syms, nil
}

// functionRow is a row of docs/guest-functions.md's table.
type functionRow struct {
	name, version, status string
	line                  int
}

// parseFunctionTable reads the rows of the Markdown table whose header
// starts "| function | version | status |".
func parseFunctionTable(doc string) ([]functionRow, error) {
	return parseFunctionTableAfter(doc, "")
}

// parseFunctionTableAfter is parseFunctionTable on the first such table
// after the line heading ("": from the top).
func parseFunctionTableAfter(doc, heading string) ([]functionRow, error) {
	var rows []functionRow
	inTable, seenHeading := false, heading == ""
	for n, line := range strings.Split(doc, "\n") {
		line = strings.TrimSpace(line)
		if !seenHeading {
			seenHeading = line == heading
			continue
		}
		if !inTable {
			inTable = strings.HasPrefix(strings.Join(strings.Fields(line), " "), "| function | version | status |")
			continue
		}
		if !strings.HasPrefix(line, "|") {
			break // the table ended
		}
		if strings.HasPrefix(line, "|---") || strings.HasPrefix(line, "| ---") {
			continue
		}
		cells := strings.Split(strings.ReplaceAll(line, `\|`, "\x00"), "|")
		if len(cells) < 5 {
			return nil, fmt.Errorf("line %d: a row of fewer than four cells: %s", n+1, line)
		}
		name := strings.TrimSpace(cells[1])
		if len(name) < 3 || !strings.HasPrefix(name, "`") || !strings.HasSuffix(name, "`") {
			return nil, fmt.Errorf("line %d: the function %q is not written `name`", n+1, name)
		}
		rows = append(rows, functionRow{
			name:    strings.Trim(name, "`"),
			version: strings.TrimSpace(cells[2]),
			status:  strings.TrimSpace(cells[3]),
			line:    n + 1,
		})
	}
	if !seenHeading {
		return nil, fmt.Errorf("no heading %q", heading)
	}
	if !inTable || len(rows) == 0 {
		return nil, errors.New(`no table with the header "| function | version | status | notes |" and rows`)
	}
	return rows, nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
