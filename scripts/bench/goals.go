package main

// Issue 34's goals, as same-run ratios of the serial block, and the
// baseline built from a git revision for a before/after in the same run.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// renderGoals writes the one-shot and served goals against the serial
// rows of the same run: overheads over bare python, and the in-process
// overhead as a multiple of bwrap's.
func renderGoals(b *strings.Builder, rep *report) {
	rows := map[string]row{}
	for _, r := range rep.Serial {
		rows[r.Variant] = r
	}
	mb, okMB := rows["microbox"]
	bw, okBW := rows["bwrap"]
	b.WriteString("### Goals (issue 34), from the serial rows above\n\n")
	b.WriteString("| goal | measured in this run | met |\n|---|---|---|\n")
	if okMB && okBW && bw.OverMedian > 0 {
		ratio := mb.OverMedian / bw.OverMedian
		fmt.Fprintf(b, "| one-shot in-process overhead below bwrap's | microbox %+.2f ms, bwrap %+.2f ms over python (median): %.2f× bwrap's | %s |\n",
			mb.OverMedian, bw.OverMedian, ratio, yes(ratio < 1))
	}
	if base, ok := rows["microbox-baseline"]; ok && okMB {
		fmt.Fprintf(b, "| (before/after) in-process, this build against the baseline | %+.2f ms against %+.2f ms over python (median); p99 %+.2f against %+.2f | — |\n",
			mb.OverMedian, base.OverMedian, mb.OverP99, base.OverP99)
	}
	if sv, ok := rows["microbox-serve-warm"]; ok {
		fmt.Fprintf(b, "| served exec (jails ahead) at most +2 ms median over python | %+.2f ms | %s |\n", sv.OverMedian, yes(sv.OverMedian <= 2))
		fmt.Fprintf(b, "| served exec (jails ahead) at most +5 ms p99 over python | %+.2f ms | %s |\n", sv.OverP99, yes(sv.OverP99 <= 5))
	}
	renderFloor(b, rows)
	b.WriteString("\n")
}

func yes(ok bool) string {
	if ok {
		return "yes"
	}
	return "no"
}

// buildBaseline checks out rev in a temporary git worktree and builds its
// binaries there (make build); it returns the microbox binary and a
// function that removes the worktree.
func buildBaseline(rev string) (string, func(), error) {
	dir, err := os.MkdirTemp("", "microbox-baseline-")
	if err != nil {
		return "", nil, err
	}
	tree := filepath.Join(dir, "src")
	remove := func() {
		exec.Command("git", "worktree", "remove", "--force", tree).Run()
		os.RemoveAll(dir)
	}
	for _, argv := range [][]string{
		{"git", "worktree", "add", "--detach", tree, rev},
		{"make", "-C", tree, "build"},
	} {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			remove()
			return "", nil, fmt.Errorf("-baseline-rev %s: %s: %w", rev, strings.Join(argv, " "), err)
		}
	}
	return filepath.Join(tree, "bin", "microbox"), remove, nil
}
