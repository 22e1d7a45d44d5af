// Command vmtest runs microbox's cgroup v2 test suite on a real cgroup v2
// kernel: Debian's own kernel, booted under qemu with an initramfs built
// here from a static microbox, the host's Python and the in-VM suite
// (./guest, which is the VM's /init).
//
//	go run ./scripts/vmtest            # what `make test-v2` runs
//	go run ./scripts/vmtest -keep      # keep the work directory (console log, initramfs)
//	go run ./scripts/vmtest -accel tcg # skip the KVM probe
//
// The accelerator is chosen by what works, not by what exists: a /dev/kvm
// that opens may still be unable to run a guest (a host without nested
// virtualisation), where a KVM guest hangs after the boot loader. So KVM is
// used only after a probe boot of the same kernel under it printed the
// kernel's banner within -probe-timeout; otherwise TCG.
//
// The guest prints "PASS name" / "FAIL name: reason" per test and a final
// "N passed, M failed" line on the serial console, then powers off. This
// program fails if that line is missing, if M > 0, if the console stays
// silent for -idle (a hung guest), or if qemu outlives -timeout. On any
// failure the work directory, with the console log, is kept.
package main

import (
	"bufio"
	"bytes"
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
	"sync"
	"time"
)

type options struct {
	kernel       string
	debDir       string
	python       string
	timeout      time.Duration
	idle         time.Duration
	keep         bool
	memMB        int
	cpus         int
	run          string
	accel        string
	qemu         string
	kvmDevice    string
	probeTimeout time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.kernel, "kernel", "", "kernel image to boot (default: from Debian's kernel package in -deb-dir)")
	flag.StringVar(&o.debDir, "deb-dir", "/var/cache/microbox/kernel", "where scripts/deps put linux-image-*-amd64_*.deb")
	flag.StringVar(&o.python, "python", "/usr/bin/python3", "the host Python copied into the VM")
	flag.DurationVar(&o.timeout, "timeout", 300*time.Second, "limit on the whole VM run")
	flag.DurationVar(&o.idle, "idle", 60*time.Second, "fail when the guest's console stays silent this long (a hung guest)")
	flag.StringVar(&o.accel, "accel", "auto", "qemu accelerator: auto (KVM if a probe boot works, else TCG), kvm or tcg")
	flag.StringVar(&o.qemu, "qemu", "qemu-system-x86_64", "the qemu binary")
	flag.StringVar(&o.kvmDevice, "kvm-device", "/dev/kvm", "the KVM device whose presence makes auto probe KVM")
	flag.DurationVar(&o.probeTimeout, "probe-timeout", 15*time.Second, "how long the KVM probe boot may take to print the kernel's banner")
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
	err = runIn(work, o, start)
	if err != nil || o.keep {
		// A failure keeps the console log (and the initramfs) to read.
		fmt.Printf("vmtest: work directory kept: %s (console log: %s)\n", work, filepath.Join(work, "console.log"))
		return err
	}
	return os.RemoveAll(work)
}

// runIn builds the VM's files in work and boots it.
func runIn(work string, o options, start time.Time) error {
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
	accel, why := chooseAccel(o, kernel)
	fmt.Printf("vmtest: accelerator %s (%s)\n", accel, why)
	log := filepath.Join(work, "console.log")
	passed, failed, err := boot(o, accel, kernel, initrd, log)
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
		exec.Command("make", "nsjail/nsinit/musl/init"), // the init image, which make build embeds
		exec.Command("go", "build", "-trimpath", "-tags", "osusergo,netgo,microbox_init_image", "-o", microbox,
			"-ldflags", "-s -w -linkmode external -extldflags -static"+versionStamp(), "./cmd/microbox"),
	}
	builds[0].Env = append(os.Environ(), "CGO_ENABLED=0")
	builds[2].Env = append(os.Environ(), "CGO_ENABLED=1")
	for _, b := range builds {
		b.Stdout, b.Stderr = os.Stderr, os.Stderr
		if err := b.Run(); err != nil {
			return fmt.Errorf("%s: %w", strings.Join(b.Args, " "), err)
		}
	}
	return nil
}

// versionStamp stamps the VM's microbox as the Makefile stamps
// bin/microbox (microbox --version): the version from git describe, else
// "dev", and the commit.
func versionStamp() string {
	version, commit := "dev", ""
	if out, err := exec.Command("git", "describe", "--tags", "--always", "--dirty").Output(); err == nil && len(bytes.TrimSpace(out)) > 0 {
		version = string(bytes.TrimSpace(out))
	}
	if out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		commit = string(bytes.TrimSpace(out))
	}
	return " -X main.version=" + version + " -X main.commit=" + commit
}

// boot runs the VM until it powers off, echoing and logging its console,
// and returns the suite's counts. A console silent for o.idle ends it: a
// guest that hangs fails in a minute, not at the whole run's timeout.
func boot(o options, accel, kernel, initrd, logPath string) (int, int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	cmdline := "console=ttyS0 panic=-1 quiet rdinit=/init"
	if o.run != "" {
		cmdline += " vmtest.run=" + o.run
	}
	qemu := exec.CommandContext(ctx, o.qemu, qemuArgs(o, accel, kernel, cmdline, "-initrd", initrd)...)
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
	w := newWatchdog(o.idle, cancel)
	sum := scanConsole(io.TeeReader(out, logFile), os.Stdout, bootStart, w.fed)
	w.stop()
	waitErr := qemu.Wait()
	switch {
	case w.fired():
		return 0, 0, fmt.Errorf("the guest's console was silent for %s (%d PASS, %d FAIL lines before): it hung; console log: %s", o.idle, sum.passes, sum.fails, logPath)
	case ctx.Err() != nil:
		return 0, 0, fmt.Errorf("the VM did not power off within %s (console log: %s)", o.timeout, logPath)
	case waitErr != nil:
		return 0, 0, fmt.Errorf("qemu: %w (console log: %s)", waitErr, logPath)
	}
	return sum.verdict()
}

// qemuArgs is the command line of a VM that boots kernel with cmdline;
// extra adds to it (the initramfs).
func qemuArgs(o options, accel, kernel, cmdline string, extra ...string) []string {
	args := []string{
		"-machine", "pc", "-accel", accel, "-m", strconv.Itoa(o.memMB), "-smp", strconv.Itoa(o.cpus),
		"-nodefaults", "-no-user-config", "-display", "none", "-serial", "stdio", "-no-reboot",
		"-kernel", kernel, "-append", cmdline,
	}
	args = append(args, extra...)
	// qboot (in qemu-system-data) boots -kernel directly and faster than
	// SeaBIOS, which Debian's qemu only recommends.
	if _, err := os.Stat("/usr/share/qemu/qboot.rom"); err == nil {
		args = append(args, "-bios", "qboot.rom")
	}
	return args
}

// chooseAccel picks qemu's accelerator and says why. -accel kvm or tcg is
// taken as given. With auto, TCG unless the KVM device opens and a probe
// boot under KVM prints the kernel's banner: these hosts may have a
// /dev/kvm that opens but cannot run a guest, which then hangs silently.
func chooseAccel(o options, kernel string) (accel, why string) {
	if o.accel != "auto" {
		return o.accel, "as asked by -accel"
	}
	f, err := os.OpenFile(o.kvmDevice, os.O_RDWR, 0)
	if err != nil {
		return "tcg", fmt.Sprintf("%s cannot be opened: %v", o.kvmDevice, unwrapPath(err))
	}
	f.Close()
	if err := probeKVM(o, kernel); err != nil {
		return "tcg", fmt.Sprintf("%s opens, but a KVM guest does not boot: %v", o.kvmDevice, err)
	}
	return "kvm", "a probe boot under KVM printed the kernel's banner"
}

// kernelBanner is the first line every Linux kernel prints.
const kernelBanner = "Linux version "

// probeKVM boots kernel under KVM with no initramfs and waits for its
// banner on the console; it kills the probe either way.
func probeKVM(o options, kernel string) error {
	ctx, cancel := context.WithTimeout(context.Background(), o.probeTimeout)
	defer cancel()
	probe := o
	probe.memMB, probe.cpus = 256, 1
	qemu := exec.CommandContext(ctx, o.qemu, qemuArgs(probe, "kvm", kernel, "console=ttyS0 panic=-1 loglevel=5")...)
	qemu.WaitDelay = time.Second
	out, err := qemu.StdoutPipe()
	if err != nil {
		return err
	}
	var stderr strings.Builder
	qemu.Stderr = &stderr
	if err := qemu.Start(); err != nil {
		return fmt.Errorf("start %s: %w", o.qemu, err)
	}
	seen := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		found := false
		for sc.Scan() {
			if !found && strings.Contains(sc.Text(), kernelBanner) {
				found = true
				seen <- true
			}
		}
		if !found {
			seen <- false
		}
	}()
	var ok bool
	select {
	case ok = <-seen:
	case <-ctx.Done():
	}
	cancel() // the probe has told what it can: end it
	qemu.Wait()
	switch {
	case ok:
		return nil
	case ctx.Err() != nil && stderr.Len() == 0:
		return fmt.Errorf("no kernel banner within %s", o.probeTimeout)
	}
	return fmt.Errorf("qemu ended without the kernel's banner: %s", strings.TrimSpace(stderr.String()))
}

// unwrapPath drops the path from an *os.PathError the message names.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// watchdog cancels the VM when nothing came from its console for idle.
type watchdog struct {
	timer *time.Timer
	idle  time.Duration
	mu    sync.Mutex
	fire  bool
}

func newWatchdog(idle time.Duration, cancel func()) *watchdog {
	w := &watchdog{idle: idle}
	w.timer = time.AfterFunc(idle, func() {
		w.mu.Lock()
		w.fire = true
		w.mu.Unlock()
		cancel()
	})
	return w
}

// fed says the console printed something.
func (w *watchdog) fed() { w.timer.Reset(w.idle) }

func (w *watchdog) stop() { w.timer.Stop() }

func (w *watchdog) fired() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.fire
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
// boot, and counts the suite's result lines; fed is called for each line.
func scanConsole(r io.Reader, w io.Writer, since time.Time, fed func()) summary {
	var s summary
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fed()
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
