package eval

import (
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/microbox/microbox/internal/batch"
	"github.com/microbox/microbox/result"
)

// mbppHarness runs an MBPP sample and reports each assert's outcome (see
// the file's comment for its input and records).
//
//go:embed mbpp_harness.py
var mbppHarness string

// mbppCode is the -c program that runs the harness, compiled under a name
// the module policy (package guard) counts as the standard library's,
// "<frozen ...>": a policy then applies to the imports of the program,
// which the harness runs as "<string>", and not to the harness's own.
var mbppCode = sync.OnceValue(func() string {
	literal, _ := json.Marshal(mbppHarness) // a JSON string is a Python string literal
	return "exec(compile(" + string(literal) + `, "<frozen microbox_mbpp_harness>", "exec"))`
})

// mbppMarker precedes each of the harness's records, then the run's nonce.
const mbppMarker = "@@microbox-mbpp@@"

// MBPPOptions are eval mbpp's.
type MBPPOptions struct {
	// Challenge adds each problem's challenge_test_list to its tests.
	Challenge  bool
	StopOnFail bool
	// Timeout is each assert's limit (and the completion's with the setup
	// code); TotalTimeout the whole run's, by default Timeout × (asserts +
	// 1).
	Timeout, TotalTimeout time.Duration
}

// mbppProblem is one MBPP problem, in the original layout or the
// sanitized one (whose test_imports are setup code).
type mbppProblem struct {
	TaskID        json.RawMessage `json:"task_id"`
	SetupCode     string          `json:"test_setup_code"`
	TestImports   []string        `json:"test_imports"`
	TestList      []string        `json:"test_list"`
	ChallengeList []string        `json:"challenge_test_list"`
}

// mbppTests are what a sample of a problem runs after its completion.
type mbppTests struct {
	setup string
	tests []string
}

// ReadMBPPProblems reads an MBPP problems file (mbpp.jsonl, or the
// sanitized set's), with or without the challenge tests.
func ReadMBPPProblems(name string, challenge bool) (map[string]*mbppTests, error) {
	ps := map[string]*mbppTests{}
	err := readJSONLines(name, func(line []byte) error {
		var p mbppProblem
		if err := json.Unmarshal(line, &p); err != nil {
			return fmt.Errorf("not an MBPP problem: %v", strings.TrimPrefix(err.Error(), "json: "))
		}
		id, ok := idText(p.TaskID)
		if !ok {
			return fmt.Errorf(`an MBPP problem needs a "task_id" (a number or a string)`)
		}
		if len(p.TestList) == 0 {
			return fmt.Errorf("problem %s has no test_list", id)
		}
		if ps[id] != nil {
			return fmt.Errorf("problem %s appears twice", id)
		}
		t := &mbppTests{setup: strings.Join(append(p.TestImports, p.SetupCode), "\n"), tests: p.TestList}
		if challenge {
			t.tests = append(t.tests, p.ChallengeList...)
		}
		ps[id] = t
		return nil
	})
	if err == nil && len(ps) == 0 {
		err = fmt.Errorf("%s: no problems in it", name)
	}
	return ps, err
}

// LoadMBPP reads the problems and the samples, each of which must name a
// known problem. Each sample is one run of the harness, which runs its
// completion, the setup code, then each assert.
func LoadMBPP(problemsFile, samplesFile string, o MBPPOptions) (*Set, error) {
	problems, err := ReadMBPPProblems(problemsFile, o.Challenge)
	if err != nil {
		return nil, err
	}
	samples, err := readSamples(samplesFile, func(id string) error {
		if problems[id] == nil {
			return fmt.Errorf("task_id %s is not in the problems file", id)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	code := mbppCode()
	return &Set{Samples: samples, stopOnFail: o.StopOnFail, oneRun: true,
		tests: func(s *Sample) int { return len(problems[s.TaskID].tests) },
		plan: func(s *Sample) []run {
			return []run{o.run(&code, s, problems[s.TaskID])}
		},
	}, nil
}

// run is a sample's one run: the harness, its input on stdin with a
// nonce of the run's own.
func (o *MBPPOptions) run(code *string, s *Sample, p *mbppTests) run {
	nonce := newNonce()
	var in strings.Builder
	fmt.Fprintf(&in, "%s %s %d %d\n", nonce, strconv.FormatFloat(o.Timeout.Seconds(), 'f', -1, 64), boolInt(o.StopOnFail), len(p.tests))
	for _, blob := range append([]string{s.Completion, p.setup}, p.tests...) {
		fmt.Fprintf(&in, "%d\n%s", len(blob), blob)
	}
	stdin := in.String()
	total := o.TotalTimeout
	if total == 0 {
		total = o.Timeout * time.Duration(len(p.tests)+1)
	}
	task := &batch.Task{Code: code, Stdin: &stdin, Timeout: batch.Duration(total), Source: &s.Completion}
	return run{task: task, count: len(p.tests), judge: func(r *result.Result, tests []TestVerdict) string {
		judgeMBPP(r, nonce, tests)
		return ""
	}}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// newNonce is 128 random bits in hex.
func newNonce() string {
	b := make([]byte, 16)
	rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// judgeMBPP fills the verdicts of a sample's asserts from the harness's
// records. The program failing before the asserts (an exception in the
// completion or setup code, or the run ending there) fails them all that
// way. An assert without a record is the one the run ended in, judged by
// how it ended; the asserts after it did not run.
func judgeMBPP(r *result.Result, nonce string, tests []TestVerdict) {
	setup, recs := mbppRecords(r.Stdout, nonce)
	if setup == nil || setup.Status != TestPassed {
		t := endedTest(r)
		if setup != nil {
			t = *setup
		}
		t.WallTimeMs = 0
		t.Message = strings.TrimSuffix("before the tests: "+t.Message, ": ")
		for i := range tests {
			tests[i] = t
		}
		return
	}
	spent := setup.WallTimeMs
	for i := range tests {
		switch {
		case recs[i] != nil:
			tests[i] = *recs[i]
			spent += recs[i].WallTimeMs
		case i == 0 || recs[i-1] != nil:
			tests[i] = endedTest(r)
			tests[i].WallTimeMs = math.Round(max(0, r.WallTimeMs-spent)*1000) / 1000
		default:
			tests[i] = TestVerdict{Status: TestNotRun, Message: notRunEnded}
		}
	}
}

// mbppRecords reads the harness's records that carry the run's nonce:
// the setup's, and the asserts' by index.
func mbppRecords(stdout, nonce string) (*TestVerdict, map[int]*TestVerdict) {
	var setup *TestVerdict
	recs := map[int]*TestVerdict{}
	prefix := mbppMarker + nonce + " "
	for rest := stdout; ; {
		i := strings.Index(rest, prefix)
		if i < 0 {
			return setup, recs
		}
		rest = rest[i+len(prefix):]
		what, t, ok := parseRecord(&rest)
		if !ok {
			continue
		}
		if what == "setup" {
			setup = t
		} else if n, err := strconv.Atoi(what); err == nil {
			recs[n] = t
		}
	}
}

// parseRecord reads "WHAT STATUS MS LENGTH:MESSAGE" from the start of
// *rest and moves past it.
func parseRecord(rest *string) (string, *TestVerdict, bool) {
	head, tail, ok := strings.Cut(*rest, ":")
	f := strings.Split(head, " ")
	if !ok || len(f) != 4 {
		return "", nil, false
	}
	ms, err1 := strconv.ParseFloat(f[2], 64)
	n, err2 := strconv.Atoi(f[3])
	if err1 != nil || err2 != nil || n < 0 || n > len(tail) {
		return "", nil, false
	}
	*rest = tail[n:]
	return f[0], &TestVerdict{Status: f[1], WallTimeMs: ms, Message: tail[:n]}, true
}
