// Command importcost measures what linking a Go package costs at every
// start of a program: Go runs the initialisation of every linked package
// before main, so a dependency that only one microbox command uses still
// slows every `microbox exec`.
//
// For each package it builds a static program that only imports it (in a
// throwaway module, fetching the package through the module proxy), then
// times start-to-exit of each program against an empty one, interleaved
// round by round, and prints the medians and the difference:
//
//	go run ./scripts/importcost github.com/spf13/cobra github.com/containerd/cgroups/v3/cgroup2
//	go run ./scripts/importcost -cgo github.com/seccomp/libseccomp-golang
//
// With -cgo the programs (the reference too) are built with cgo and
// linked statically against glibc, as microbox is.
package main

import (
	"cmp"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

func main() {
	rounds := flag.Int("n", 200, "timed runs of each program")
	cgo := flag.Bool("cgo", false, "build with cgo, statically linked against glibc")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: importcost [-n N] [-cgo] PACKAGE...")
		os.Exit(2)
	}
	if err := measure(flag.Args(), *rounds, *cgo); err != nil {
		fmt.Fprintln(os.Stderr, "importcost:", err)
		os.Exit(1)
	}
}

// measure builds the programs in a throwaway module, times them and
// prints the table.
func measure(pkgs []string, rounds int, cgo bool) error {
	dir, err := os.MkdirTemp("", "importcost-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	pkgs = append([]string{""}, pkgs...) // "" is the empty reference
	bins := make([]string, len(pkgs))
	if err := run(dir, "go", "mod", "init", "importcost"); err != nil {
		return err
	}
	for i, p := range pkgs {
		if p != "" {
			if err := run(dir, "go", "get", p); err != nil {
				return err
			}
		}
		if bins[i], err = build(dir, i, p, cgo); err != nil {
			return err
		}
	}
	times := make([][]time.Duration, len(pkgs))
	for r := -10; r < rounds; r++ { // 10 warm-up rounds
		for i, b := range bins {
			start := time.Now()
			if err := exec.Command(b).Run(); err != nil {
				return fmt.Errorf("run the program importing %q: %w", pkgs[i], err)
			}
			if r >= 0 {
				times[i] = append(times[i], time.Since(start))
			}
		}
	}
	ref := median(times[0])
	fmt.Printf("| imported | median ms | Δ ms |\n|---|--:|--:|\n")
	for i, p := range pkgs {
		m := median(times[i])
		fmt.Printf("| %s | %.2f | %+.2f |\n", cmp.Or(p, "(nothing)"), ms(m), ms(m-ref))
	}
	return nil
}

func build(dir string, i int, pkg string, cgo bool) (string, error) {
	src := filepath.Join(dir, fmt.Sprintf("p%d", i))
	if err := os.MkdirAll(src, 0o755); err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("package main\n\n")
	if cgo {
		b.WriteString("// int x(void) { return 1; }\nimport \"C\"\n")
	}
	if pkg != "" {
		fmt.Fprintf(&b, "import _ %q\n", pkg)
	}
	b.WriteString("\nfunc main() {")
	if cgo {
		b.WriteString(" C.x() ")
	}
	b.WriteString("}\n")
	if err := os.WriteFile(filepath.Join(src, "main.go"), []byte(b.String()), 0o644); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, fmt.Sprintf("bin%d", i))
	args := []string{"build", "-o", bin, "-ldflags", "-s -w"}
	env := "CGO_ENABLED=0"
	if cgo {
		args = []string{"build", "-o", bin, "-tags", "netgo,osusergo", "-ldflags", "-linkmode external -extldflags -static -s -w"}
		env = "CGO_ENABLED=1"
	}
	cmd := exec.Command("go", append(args, "./"+filepath.Base(src))...)
	cmd.Dir, cmd.Env, cmd.Stderr = dir, append(os.Environ(), env), os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build a program importing %q: %w", pkg, err)
	}
	return bin, nil
}

func run(dir string, argv ...string) error {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Stderr = dir, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
	}
	return nil
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }
