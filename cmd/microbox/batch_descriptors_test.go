package main

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/microbox/microbox/result"
)

// A batch of more jobs than its RLIMIT_NOFILE of 64 holds at once: a
// start that fails for want of descriptors is tried again as other runs
// end, and a task that still could not start says so ("not started"),
// not as a verdict on the run.
func TestBatchOutOfDescriptors(t *testing.T) {
	const tasks = 40
	var in strings.Builder
	for i := range tasks {
		fmt.Fprintf(&in, `{"id": %d, "code": "import time; time.sleep(0.2); print(%d)"}`+"\n", i, i)
	}
	cmd := exec.Command("prlimit", "--nofile=64:64", microbox, "batch", "--jobs", "8")
	cmd.Stdin = strings.NewReader(in.String())
	out, errOut, code := runCmd(t, cmd)
	lines := decodeLines(t, out)
	if len(lines) != tasks {
		t.Fatalf("%d result lines for %d tasks (exit %d): %s", len(lines), tasks, code, errOut)
	}
	ok := 0
	for _, l := range lines {
		switch {
		case l.Status == result.StatusOK && l.Stdout == fmt.Sprintf("%s\n", l.ID):
			ok++
		case l.Status == result.StatusSandboxError && l.Error != nil && strings.HasPrefix(*l.Error, "not started: microbox is out of file descriptors"):
		default:
			t.Errorf("task %s: status %s stdout %q error %s", l.ID, l.Status, l.Stdout, deref(l.Error))
		}
	}
	// Tried again as others end, most start (without: about one per
	// run that fits in the descriptors, here 4).
	if ok < tasks/4 {
		t.Errorf("%d of %d tasks ran: their starts were not tried again", ok, tasks)
	}
}
