// Command vmtest runs microbox's cgroup v2 test suite on a real cgroup v2
// kernel: Debian's own kernel, booted under qemu (TCG when there is no
// KVM) with an initramfs built here from a static microbox, the host's
// Python and the in-VM suite (./guest, which is the VM's /init).
//
//	go run ./scripts/vmtest            # what `make test-v2` runs
//	go run ./scripts/vmtest -keep      # keep the work directory (console log, initramfs)
//
// The guest prints "PASS name" / "FAIL name: reason" per test and a final
// "N passed, M failed" line on the serial console, then powers off. This
// program fails if that line is missing, if M > 0, or if qemu outlives
// -timeout.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

type options struct {
	kernel  string
	debDir  string
	python  string
	timeout time.Duration
	keep    bool
	memMB   int
	cpus    int
	run     string
}

func main() {
	var o options
	flag.StringVar(&o.kernel, "kernel", "", "kernel image to boot (default: from Debian's kernel package in -deb-dir)")
	flag.StringVar(&o.debDir, "deb-dir", "/var/cache/microbox/kernel", "where scripts/deps put linux-image-*-amd64_*.deb")
	flag.StringVar(&o.python, "python", "/usr/bin/python3", "the host Python copied into the VM")
	flag.DurationVar(&o.timeout, "timeout", 300*time.Second, "limit on the whole VM run")
	flag.BoolVar(&o.keep, "keep", false, "keep the work directory")
	flag.IntVar(&o.memMB, "mem", 1024, "VM memory in MiB")
	flag.IntVar(&o.cpus, "smp", 2, "VM CPUs")
	flag.StringVar(&o.run, "run", "", "run only the guest tests whose names contain this")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "vmtest:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	start := time.Now()
	work, err := os.MkdirTemp("", "microbox-vmtest-")
	if err != nil {
		return err
	}
	if o.keep {
		fmt.Println("vmtest: work directory", work)
	} else {
		defer os.RemoveAll(work)
	}
	guest, microbox := filepath.Join(work, "init"), filepath.Join(work, "microbox")
	if err := buildBinaries(guest, microbox); err != nil {
		return err
	}
	initrd := filepath.Join(work, "initramfs.cpio.gz")
	if err := buildInitramfs(initrd, guest, microbox, o.python); err != nil {
		return fmt.Errorf("initramfs: %w", err)
	}
	kernel, err := findKernel(o.kernel, o.debDir)
	if err != nil {
		return err
	}
	fi, _ := os.Stat(initrd)
	fmt.Printf("vmtest: built in %.1fs: initramfs %.1f MB, kernel %s\n", time.Since(start).Seconds(), float64(fi.Size())/1e6, kernel)
	log := filepath.Join(work, "console.log")
	passed, failed, err := boot(o, kernel, initrd, log)
	fmt.Printf("vmtest: %.1fs in total\n", time.Since(start).Seconds())
	if err != nil {
		return err
	}
	fmt.Printf("vmtest: %d passed, %d failed\n", passed, failed)
	if failed > 0 {
		return fmt.Errorf("%d tests failed in the VM", failed)
	}
	return nil
}

// buildBinaries builds the guest (pure Go, static) and a static microbox
// (cgo: libseccomp and libc linked in from Debian's .a files).
func buildBinaries(guest, microbox string) error {
	if _, err := os.Stat("go.mod"); err != nil {
		return errors.New("run from the repository root (go run ./scripts/vmtest)")
	}
	builds := []*exec.Cmd{
		exec.Command("go", "build", "-trimpath", "-o", guest, "./scripts/vmtest/guest"),
		exec.Command("go", "build", "-trimpath", "-tags", "osusergo,netgo", "-o", microbox,
			"-ldflags", "-s -w -linkmode external -extldflags -static", "./cmd/microbox"),
	}
	builds[0].Env = append(os.Environ(), "CGO_ENABLED=0")
	builds[1].Env = append(os.Environ(), "CGO_ENABLED=1")
	for _, b := range builds {
		b.Stdout, b.Stderr = os.Stderr, os.Stderr
		if err := b.Run(); err != nil {
			return fmt.Errorf("%s: %w", strings.Join(b.Args, " "), err)
		}
	}
	return nil
}

// boot runs the VM until it powers off, echoing and logging its console,
// and returns the suite's counts.
func boot(o options, kernel, initrd, logPath string) (int, int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	cmdline := "console=ttyS0 panic=-1 quiet rdinit=/init"
	if o.run != "" {
		cmdline += " vmtest.run=" + o.run
	}
	args := []string{
		"-machine", "pc", "-accel", accel(), "-m", strconv.Itoa(o.memMB), "-smp", strconv.Itoa(o.cpus),
		"-nodefaults", "-no-user-config", "-display", "none", "-serial", "stdio", "-no-reboot",
		"-kernel", kernel, "-initrd", initrd, "-append", cmdline,
	}
	// qboot (in qemu-system-data) boots -kernel directly and faster than
	// SeaBIOS, which Debian's qemu only recommends.
	if _, err := os.Stat("/usr/share/qemu/qboot.rom"); err == nil {
		args = append(args, "-bios", "qboot.rom")
	}
	qemu := exec.CommandContext(ctx, "qemu-system-x86_64", args...)
	qemu.WaitDelay = 5 * time.Second
	out, err := qemu.StdoutPipe()
	if err != nil {
		return 0, 0, err
	}
	qemu.Stderr = os.Stderr
	logFile, err := os.Create(logPath)
	if err != nil {
		return 0, 0, err
	}
	defer logFile.Close()
	bootStart := time.Now()
	if err := qemu.Start(); err != nil {
		return 0, 0, fmt.Errorf("start qemu (scripts/deps installs qemu-system-x86): %w", err)
	}
	sum := scanConsole(io.TeeReader(out, logFile), os.Stdout, bootStart)
	waitErr := qemu.Wait()
	if ctx.Err() != nil {
		return 0, 0, fmt.Errorf("the VM did not power off within %s (console log: %s)", o.timeout, logPath)
	}
	if waitErr != nil {
		return 0, 0, fmt.Errorf("qemu: %w", waitErr)
	}
	return sum.verdict()
}

// accel is KVM when this process may use it, else TCG.
func accel() string {
	if f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0); err == nil {
		f.Close()
		return "kvm"
	}
	return "tcg"
}

// summary is what the guest reported on its console.
type summary struct {
	passes, fails int
	final         bool // the closing "N passed, M failed" line was seen
	finalPassed   int
	finalFailed   int
}

var closingLine = regexp.MustCompile(`^(\d+) passed, (\d+) failed$`)

// scanConsole echoes the console to w, each line with the seconds since
// boot, and counts the suite's result lines.
func scanConsole(r io.Reader, w io.Writer, since time.Time) summary {
	var s summary
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		fmt.Fprintf(w, "[%6.1fs] %s\n", time.Since(since).Seconds(), line)
		s.add(line)
	}
	return s
}

// add counts one console line.
func (s *summary) add(line string) {
	switch {
	case strings.HasPrefix(line, "PASS "):
		s.passes++
	case strings.HasPrefix(line, "FAIL "):
		s.fails++
	default:
		if m := closingLine.FindStringSubmatch(line); m != nil {
			s.final = true
			s.finalPassed, _ = strconv.Atoi(m[1])
			s.finalFailed, _ = strconv.Atoi(m[2])
		}
	}
}

// verdict checks that the suite finished and agrees with its own lines.
func (s summary) verdict() (int, int, error) {
	if !s.final {
		return s.passes, s.fails, fmt.Errorf("the guest never printed its closing line (%d PASS, %d FAIL lines seen): it crashed or hung", s.passes, s.fails)
	}
	if s.finalPassed != s.passes || s.finalFailed != s.fails {
		return s.passes, s.fails, fmt.Errorf("the guest's closing line says %d passed, %d failed but its console has %d PASS and %d FAIL lines",
			s.finalPassed, s.finalFailed, s.passes, s.fails)
	}
	if s.passes == 0 {
		return 0, s.fails, errors.New("the guest ran no test")
	}
	return s.passes, s.fails, nil
}
