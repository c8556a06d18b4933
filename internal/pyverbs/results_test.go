package pyverbs

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

const sampleResults = `{"test": "tests.test_addr.AHTest.test_create_ah", "outcome": "pass", "reason": ""}
{"test": "tests.test_addr.AHTest.test_create_ah_roce", "outcome": "error", "reason": "pyverbs.pyverbs_error.PyverbsError: Successfully created a non-global AH on RoCE port=1"}
{"test": "tests.test_mr.MWTest.test_mw_type1", "outcome": "error", "reason": "PyverbsRDMAError: Failed to register a MR. Errno: 22"}
{"test": "tests.test_mr.MWTest.test_mw_type2", "outcome": "error", "reason": "PyverbsRDMAError: Failed to register a MR. Errno: 22"}
{"test": "tests.test_mr.MWTest.test_reg_mw_wrong_type", "outcome": "skip", "reason": "Create memory window of type 3 is not supported"}
{"test": "tests.test_device.DeviceTest.test_phys_port_cnt_ex", "outcome": "fail", "reason": "AssertionError: 1 != 0"}

{"end": true, "ran": 6}
`

func TestParseResults(t *testing.T) {
	run, err := ParseResults(strings.NewReader(sampleResults))
	if err != nil {
		t.Fatal(err)
	}
	if run.Ran != 6 || len(run.Results) != 6 {
		t.Fatalf("ran %d, %d results: want 6 and 6", run.Ran, len(run.Results))
	}
	c := run.Count()
	if want := (Counts{Pass: 1, Error: 3, Skip: 1, Fail: 1}); !reflect.DeepEqual(c, want) {
		t.Errorf("counts %v, want %v", c, want)
	}
	if c.NotSkipped() != 5 {
		t.Errorf("NotSkipped() = %d, want 5", c.NotSkipped())
	}
	if got, want := c.String(), "1 passed, 1 failed, 3 errors, 1 skipped"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	want := []Group{
		{"test_addr.AHTest", Error, "pyverbs.pyverbs_error.PyverbsError: Successfully created a non-global AH on RoCE port=1", []string{"test_create_ah_roce"}},
		{"test_device.DeviceTest", Fail, "AssertionError: 1 != 0", []string{"test_phys_port_cnt_ex"}},
		{"test_mr.MWTest", Error, "PyverbsRDMAError: Failed to register a MR. Errno: 22", []string{"test_mw_type1", "test_mw_type2"}},
		{"test_mr.MWTest", Skip, "Create memory window of type 3 is not supported", []string{"test_reg_mw_wrong_type"}},
	}
	if got := run.Groups(); !reflect.DeepEqual(got, want) {
		t.Errorf("Groups() =\n%+v\nwant\n%+v", got, want)
	}
}

// TestParseResultsRefuses: what is not the runner's output is an error that
// names the line and what is wrong with it; results without the end line
// are ErrUnfinished, with the tests read so far.
func TestParseResultsRefuses(t *testing.T) {
	pass := `{"test": "tests.test_pd.PDTest.test_alloc_pd", "outcome": "pass", "reason": ""}` + "\n"
	end := `{"end": true, "ran": 1}` + "\n"
	tests := []struct {
		name, in string
		line     int // 0: ErrUnfinished
		want     string
		results  int
	}{
		{"no end line", pass, 0, "stopped before its end", 1},
		{"empty", "", 0, "stopped before its end", 0},
		{"not JSON", "ok\n", 1, "invalid character", 0},
		{"unknown outcome", `{"test": "t.A.b", "outcome": "passed"}` + "\n", 1, `outcome "passed" is none of`, 0},
		{"no test id", `{"outcome": "pass"}` + "\n", 1, "no test id", 0},
		{"end without count", pass + `{"end": true}` + "\n", 2, `without a count "ran"`, 1},
		{"negative count", pass + `{"end": true, "ran": -1}` + "\n", 2, `without a count "ran"`, 1},
		{"after the end", pass + end + pass, 3, "after the end line", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run, err := ParseResults(strings.NewReader(tt.in))
			var le *LineError
			switch {
			case tt.line == 0:
				if !errors.Is(err, ErrUnfinished) {
					t.Fatalf("err %v, want ErrUnfinished", err)
				}
			case !errors.As(err, &le):
				t.Fatalf("err %v (%T), want a *LineError", err, err)
			case le.Line != tt.line:
				t.Errorf("error on line %d, want %d: %v", le.Line, tt.line, err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not say %q", err, tt.want)
			}
			if len(run.Results) != tt.results {
				t.Errorf("%d results read, want %d", len(run.Results), tt.results)
			}
		})
	}
}

func TestResultClass(t *testing.T) {
	tests := []struct{ id, want string }{
		{"tests.test_mr.MWTest.test_mw_type1", "test_mr.MWTest"},
		{"setUpClass (tests.test_mr.MWTest)", "test_mr.MWTest"},
		{"test_x.A.b", "test_x.A"},
		{"lonely", "lonely"},
	}
	for _, tt := range tests {
		if got := (Result{Test: tt.id}).Class(); got != tt.want {
			t.Errorf("Class of %q = %q, want %q", tt.id, got, tt.want)
		}
	}
}

// FuzzParseResults: any input gives results or an error, never a panic,
// and the results read are all valid.
func FuzzParseResults(f *testing.F) {
	f.Add(sampleResults)
	f.Add(`{"end": true, "ran": 0}`)
	f.Add(`{"test": "a", "outcome": "skip", "reason": "x"}` + "\n{")
	f.Fuzz(func(t *testing.T, in string) {
		run, _ := ParseResults(strings.NewReader(in))
		for _, r := range run.Results {
			if r.Test == "" || !r.Outcome.valid() {
				t.Fatalf("invalid result %+v", r)
			}
		}
		run.Groups()
	})
}
