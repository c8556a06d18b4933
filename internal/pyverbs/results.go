package pyverbs

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
)

// Outcome is how one test of the suite ended, as Python's unittest tells.
type Outcome string

// The outcomes testdata/runner.py writes.
const (
	Pass  Outcome = "pass"  // the test passed
	Fail  Outcome = "fail"  // an assertion failed
	Error Outcome = "error" // the test raised (a verb refused, a crash in Python)
	Skip  Outcome = "skip"  // the test skipped itself (unittest.SkipTest), with a reason
	XFail Outcome = "xfail" // an expected failure happened
	XPass Outcome = "xpass" // an expected failure did not happen
)

func (o Outcome) valid() bool {
	switch o {
	case Pass, Fail, Error, Skip, XFail, XPass:
		return true
	}
	return false
}

// Result is one test's outcome: Test is unittest's id
// ("tests.test_mr.MWTest.test_mw_type1"), Reason the skip reason or the
// exception's last line ("PyverbsRDMAError: Failed to register a MR. ...").
type Result struct {
	Test    string  `json:"test"`
	Outcome Outcome `json:"outcome"`
	Reason  string  `json:"reason"`
}

// Class returns the test's module and class ("test_mr.MWTest"): the
// suite's unit of one feature. An error outside a test, which unittest
// names "setUpClass (tests.test_mr.MWTest)", is the class's too.
func (r Result) Class() string {
	id := r.Test
	if i := strings.Index(id, " ("); i >= 0 && strings.HasSuffix(id, ")") {
		id = id[i+2:len(id)-1] + ".x"
	}
	parts := strings.Split(id, ".")
	if len(parts) >= 3 && parts[0] == "tests" {
		parts = parts[1:]
	}
	if len(parts) >= 2 {
		return strings.Join(parts[:len(parts)-1], ".")
	}
	return id
}

// Run is a whole run of the suite: every test's result, in the order they
// ran, and the count of tests unittest says it ran.
type Run struct {
	Results []Result
	Ran     int
}

// ErrUnfinished says the results end before the runner's end line: the
// suite did not run to its end (Python crashed, or was killed).
var ErrUnfinished = errors.New("the pyverbs results end without the runner's end line: the suite stopped before its end (a crash in the library or in Python?)")

// LineError is a line of the results that is not what testdata/runner.py
// writes.
type LineError struct {
	Line int    // 1-based
	Text string // the line, cut to 200 bytes
	Err  error
}

func (e *LineError) Error() string {
	return fmt.Sprintf("pyverbs results, line %d %q: %v (want one JSON object per line as testdata/runner.py writes)", e.Line, e.Text, e.Err)
}

func (e *LineError) Unwrap() error { return e.Err }

// maxLine bounds one line of the results: a reason is one exception
// message.
const maxLine = 1 << 20

// ParseResults reads the JSON lines testdata/runner.py writes: one
// {"test","outcome","reason"} object per test, then {"end":true,"ran":N}.
// It returns what it read with ErrUnfinished if the end line is missing,
// and a *LineError for a line that is not one of the two.
func ParseResults(r io.Reader) (Run, error) {
	var run Run
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4<<10), maxLine)
	n := 0
	ended := false
	for sc.Scan() {
		n++
		line := sc.Bytes()
		if len(strings.TrimSpace(string(line))) == 0 {
			continue
		}
		bad := func(err error) error {
			text := string(line)
			if len(text) > 200 {
				text = text[:200]
			}
			return &LineError{Line: n, Text: text, Err: err}
		}
		if ended {
			return run, bad(errors.New("a line after the end line"))
		}
		var rec struct {
			Result
			End bool `json:"end"`
			Ran *int `json:"ran"`
		}
		if err := json.Unmarshal(line, &rec); err != nil {
			return run, bad(err)
		}
		switch {
		case rec.End:
			if rec.Ran == nil || *rec.Ran < 0 {
				return run, bad(errors.New("an end line without a count \"ran\" of 0 or more"))
			}
			run.Ran, ended = *rec.Ran, true
		case rec.Test == "":
			return run, bad(errors.New("no test id"))
		case !rec.Outcome.valid():
			return run, bad(fmt.Errorf("outcome %q is none of pass, fail, error, skip, xfail, xpass", rec.Outcome))
		default:
			run.Results = append(run.Results, rec.Result)
		}
	}
	if err := sc.Err(); err != nil {
		return run, fmt.Errorf("pyverbs results, after line %d: %w", n, err)
	}
	if !ended {
		return run, ErrUnfinished
	}
	return run, nil
}

// Counts is how many tests ended each way.
type Counts map[Outcome]int

// Count counts the results by outcome.
func (r Run) Count() Counts {
	c := Counts{}
	for _, res := range r.Results {
		c[res.Outcome]++
	}
	return c
}

// NotSkipped is the number of tests that ran to a verdict.
func (c Counts) NotSkipped() int {
	return c[Pass] + c[Fail] + c[Error] + c[XFail] + c[XPass]
}

// String is "65 passed, 1 failed, 8 errors, 199 skipped" (expected
// failures and unexpected successes only when there are some).
func (c Counts) String() string {
	s := fmt.Sprintf("%d passed, %d failed, %d errors, %d skipped", c[Pass], c[Fail], c[Error], c[Skip])
	if c[XFail] > 0 || c[XPass] > 0 {
		s += fmt.Sprintf(", %d expected failures, %d unexpected successes", c[XFail], c[XPass])
	}
	return s
}

// Group is the tests of one class that ended one way for one reason.
type Group struct {
	Class   string
	Outcome Outcome
	Reason  string
	Tests   []string // the test methods' names
}

// Groups gathers the results that are not passes by class, outcome and
// reason, sorted by class then outcome then reason: the suite's failures
// and skips as a short list.
func (r Run) Groups() []Group {
	type key struct {
		class  string
		out    Outcome
		reason string
	}
	idx := map[key]int{}
	var gs []Group
	for _, res := range r.Results {
		if res.Outcome == Pass {
			continue
		}
		k := key{res.Class(), res.Outcome, res.Reason}
		i, ok := idx[k]
		if !ok {
			i = len(gs)
			idx[k] = i
			gs = append(gs, Group{Class: k.class, Outcome: k.out, Reason: k.reason})
		}
		name := res.Test[strings.LastIndex(res.Test, ".")+1:]
		gs[i].Tests = append(gs[i].Tests, name)
	}
	sort.Slice(gs, func(i, j int) bool {
		a, b := gs[i], gs[j]
		if a.Class != b.Class {
			return a.Class < b.Class
		}
		if a.Outcome != b.Outcome {
			return a.Outcome < b.Outcome
		}
		return a.Reason < b.Reason
	})
	return gs
}
