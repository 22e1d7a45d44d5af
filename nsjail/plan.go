package nsjail

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"path"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/microbox/microbox/rootfs"
	"github.com/microbox/microbox/seccomp"
)

// plan is the list of steps the C init carries out, in order; see
// nsinit/plan.h for the wire format and the meaning of each step.
type plan struct {
	buf bytes.Buffer
}

// planSteps are the steps PID 1 knows and how many arguments follow each
// step's name: nsinit/plan.h's PLAN_STEPS, which initc_test.go holds
// equal. PID 1 refuses a plan with any other.
var planSteps = map[string]int{
	"trace": 0, "mount": 5, "bind": 3, "mask": 2, "remount_ro": 1, "mkdir": 2, "file": 3,
	"chown": 3, "symlink": 2, "pivot": 2, "umount": 1, "move": 2, "rmdir": 1, "chdir": 1,
	"hostname": 1, "loopback_up": 0, "phase": 1, "stdin": 1,
	// the program's settings
	"path": 1, "cwd": 1, "arg": 1, "env": 1, "user": 3, "nested_userns": 0, "keep_root": 0,
	"seccomp": 1, "timeout": 1, "rlimit": 3, "prepare": 0,
}

// programSteps are the only steps of a prepared program's own part (the
// plan's third, runPlan's launch): nsinit/plan.h's PROGRAM_STEPS, which
// initc_test.go holds equal.
var programSteps = []string{"stdin", "path", "arg", "env"}

// step appends a step; it writes its strings into the buffer as they
// are, since a server builds the plans of every run it is asked for.
func (p *plan) step(name string, args ...string) {
	p.head(name, len(args))
	for _, a := range args {
		p.u32(len(a))
		p.buf.WriteString(a)
	}
}

func (p *plan) stepBytes(name string, args ...[]byte) {
	p.head(name, len(args))
	for _, a := range args {
		p.u32(len(a))
		p.buf.Write(a)
	}
}

// head writes a step's count of arguments, its name counted, and its name.
func (p *plan) head(name string, nargs int) {
	p.u32(nargs + 1)
	p.u32(len(name))
	p.buf.WriteString(name)
}

func (p *plan) u32(n int) {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], uint32(n))
	p.buf.Write(b[:])
}

func num[T ~int | ~int64 | ~uint32 | ~uint64 | ~uintptr](v T) string {
	return strconv.FormatUint(uint64(v), 10)
}

// The new root is assembled in a staging tmpfs mounted over /tmp in the
// jail's own mount namespace, the way bubblewrap does it: pivoting into the
// stage first keeps every host path reachable under /oldroot while the
// new root is built in /newroot, then a second pivot detaches the host.
const (
	stage     = "/tmp"
	oldRoot   = "/oldroot"
	newRoot   = "/newroot"
	emptyFile = "/empty"
)

// maskedProc are the /proc entries the program does not see: those runc
// and Docker mask (kernel memory, keys, timers, scheduler and device
// internals), and those that tell of the host rather than the run (its
// boot arguments and boot id, its kernel configuration, its load and
// pressure). A file reads as empty, a directory as an empty one; an entry
// the kernel lacks is skipped.
var maskedProc = []string{
	"acpi", "asound", "kcore", "keys", "latency_stats", "timer_list", "timer_stats",
	"sched_debug", "scsi", "cmdline", "config.gz", "sys/kernel/random/boot_id",
	"pressure", "loadavg",
}

// devices are bound from the host's /dev; the jail cannot mknod them.
var devices = []string{"null", "zero", "full", "random", "urandom"}

const (
	mountNoExec  = unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC
	mountScratch = unix.MS_NOSUID | unix.MS_NODEV
)

// Flags of the "bind" step, a bit mask: nsinit/plan.h has the same values
// (BIND_READONLY, BIND_OPTIONAL), and initc_test.go holds them equal.
const (
	bindWritable = 0
	bindReadOnly = 1 << 0
	// bindOptional skips the bind when the source is missing.
	bindOptional = 1 << 1
)

// jailPlan is the plan's first part: what PID 1 does before it is ready
// for a run: the staging root, the loopback interface, then the jail's
// mounts (mountPlan), so that a jail started ahead of its run holds them
// already.
func jailPlan(trace bool, mounts *plan) *plan {
	p := &plan{}
	if trace {
		p.step("trace")
	}
	p.step("mount", "tmpfs", stage, "tmpfs", num(mountNoExec), "size=1m,mode=0755")
	p.step("mkdir", stage+newRoot, "493") // 0755
	p.step("mkdir", stage+oldRoot, "448") // 0700
	p.step("pivot", stage, stage+oldRoot)
	p.step("chdir", "/")
	p.step("loopback_up")
	p.buf.Write(mounts.buf.Bytes())
	return p
}

// framed is a part as the wire carries it: its length first, so that PID
// 1 knows when it has all of a part without waiting for EOF.
func (p *plan) framed() []byte {
	out := binary.LittleEndian.AppendUint32(nil, uint32(p.buf.Len()))
	return append(out, p.buf.Bytes()...)
}

// mountPlan builds the jail's file system and pivots into it: the root,
// /dev, /proc, the scratch tmpfs and the hostname. It depends only on the
// spec's RootDir, RootFiles, Hostname, Workdir and TmpfsSize (and the id
// mapping), so a jail started for one spec fits every spec with the same
// mount plan (Shape).
func mountPlan(s *Spec, ids idMapping) (*plan, error) {
	p := &plan{}
	if err := p.root(s, ids); err != nil {
		return nil, err
	}
	p.step("phase", "root")
	p.dev(s)
	// Masked files read as this empty file of the stage, which outlives
	// the stage's unmount through the binds.
	p.step("file", emptyFile, "292", "") // 0444
	p.proc(newRoot, emptyFile)
	p.scratch(newRoot, s, ids)
	p.step("phase", "mounts")
	p.step("hostname", s.Hostname)
	p.step("chdir", newRoot)
	p.step("pivot", ".", ".")
	p.step("umount", ".")
	p.step("chdir", "/")
	p.step("phase", "pivot")
	return p, nil
}

// runPlan is the plan's second part, what a run adds to its jail: the
// caller's files in the scratch area, stdin, and the program. For a jail
// whose program was prepared (preparedPlan) it is the files and the
// timeout only, and launch is the program's own part: stdin and what it
// execs. Otherwise launch is nil.
func runPlan(s *Spec, ids idMapping, seccompBPF []byte, prepared bool) (run, launch *plan) {
	run = &plan{}
	if s.Trace {
		run.step("trace")
	}
	made := map[string]bool{"/": true, "/tmp": true}
	for dir := s.Workdir; !made[dir]; dir = path.Dir(dir) {
		made[dir] = true // made by mountPlan
	}
	for _, f := range s.Files {
		run.scratchDir("", path.Dir(f.Path), ids, made)
		run.step("file", f.Path, num(uint32(f.Mode.Perm())), string(f.Data))
		uid, gid := ids.owner()
		run.step("chown", f.Path, uid, gid)
	}
	launch = run
	if prepared {
		launch = &plan{}
	}
	if s.Stdin == nil && !s.template && !s.Control {
		launch.step("stdin", "/dev/null") // the jail's, bound from the host
	}
	launch.exec(s)
	if s.template {
		// A zygote's template: microbox's own code as the jail's root,
		// for as long as it serves, with microbox's own limits (its
		// children set theirs, zygote.py).
		run.step("cwd", s.Workdir)
		run.step("keep_root")
		return run, nil
	}
	// PID 1 holds the wall-clock limit too (nsinit/pid1.c: arm_deadline).
	run.step("timeout", num(s.Timeout.Nanoseconds()))
	if prepared {
		return run, launch
	}
	run.buf.Write(sandboxPlan(s, ids, seccompBPF).buf.Bytes())
	return run, nil
}

// preparedPlan ends the first part of a jail started ahead of its run: the
// program's settings that do not depend on the run (sandboxPlan), then
// "prepare", which has PID 1 fork the program's process and sandbox it
// before the run comes (nsinit/pid1.c: prepare_program). Nil for a spec
// whose program cannot wait that way: a zygote's template and a held run
// (their fd 0 is a socket to microbox), and a filter that is not the one
// of microbox's own mode it names (seccomp.Own: a caller's profile might
// refuse the calls the waiting process makes under it).
func preparedPlan(s *Spec, ids idMapping) *plan {
	if s.template || s.Control || !seccomp.Own(s.Seccomp, seccomp.Mode(s.SeccompMode)) {
		return nil
	}
	p := sandboxPlan(s, ids, s.Seccomp)
	p.step("prepare")
	return p
}

// root fills /newroot// root fills /newroot: a read-only bind of a prepared tree, or a tmpfs
// (the stage's own) holding the host-derived entries, made read-only after.
func (p *plan) root(s *Spec, ids idMapping) error {
	if s.RootDir != "" {
		p.step("bind", oldRoot+s.RootDir, newRoot, num(bindReadOnly))
		p.rootFilesTmpfs(s)
		return nil
	}
	// A bind onto itself makes /newroot a mount point: pivot_root needs
	// one, and it can then be made read-only on its own.
	p.step("bind", newRoot, newRoot, num(bindWritable))
	entries, err := rootfs.HostEntries(ids.identity(), s.Hostname)
	if err != nil {
		return err
	}
	made := map[string]bool{"/": true}
	for _, e := range entries {
		p.mkdirAll(path.Dir(e.Path), made)
		dst := newRoot + e.Path
		switch e.Kind {
		case rootfs.Bind:
			p.step("mkdir", dst, "493")
			p.step("bind", oldRoot+e.Source, dst, num(bindReadOnly))
		case rootfs.BindFile:
			p.step("file", dst, "420", "")
			p.step("bind", oldRoot+e.Source, dst, num(bindReadOnly))
		case rootfs.Symlink:
			p.step("symlink", e.Source, dst)
		case rootfs.File:
			p.step("file", dst, "420", string(e.Data)) // 0644
		}
	}
	for _, d := range rootfs.RequiredDirs {
		p.mkdirAll(d, made)
	}
	if !underTmp(s.Workdir) {
		p.mkdirAll(s.Workdir, made)
	}
	if len(s.RootFiles) > 0 {
		p.mkdirAll(path.Dir(RootFilesDir), made)
	}
	p.step("remount_ro", newRoot)
	p.rootFilesTmpfs(s)
	return nil
}

// rootFiles writes the spec's RootFiles into /newroot, owned by the jail's
// root.
func (p *plan) rootFiles(s *Spec, made map[string]bool) {
	for _, f := range s.RootFiles {
		p.mkdirAll(path.Dir(f.Path), made)
		p.step("file", newRoot+f.Path, num(uint32(f.Mode.Perm())), string(f.Data))
	}
}

// rootFilesTmpfs places RootFiles in the read-only root: a tmpfs just big
// enough for them goes on its /run (in a prepared root, hiding what the
// image keeps there, which a run does not need), then is made read-only
// itself. Nothing is mounted when there are no files.
func (p *plan) rootFilesTmpfs(s *Spec) {
	if len(s.RootFiles) == 0 {
		return
	}
	run := path.Dir(RootFilesDir)
	size := 64 << 10
	for _, f := range s.RootFiles {
		size += len(f.Data) + 4096 // a page for each file's tail
	}
	p.step("mount", "tmpfs", newRoot+run, "tmpfs", num(mountNoExec), fmt.Sprintf("size=%d,mode=0755", size))
	p.rootFiles(s, map[string]bool{"/": true, run: true})
	p.step("remount_ro", newRoot+run)
}

// mkdirAll emits mkdir steps for dir and its missing parents in /newroot.
func (p *plan) mkdirAll(dir string, made map[string]bool) {
	if made[dir] || !path.IsAbs(dir) {
		return
	}
	p.mkdirAll(path.Dir(dir), made)
	p.step("mkdir", newRoot+dir, "493")
	made[dir] = true
}

// dev builds a minimal /dev: a few harmless device nodes bound from the
// host, the usual /proc/self/fd links, and a private /dev/shm for
// multiprocessing. No tty, no pts, no block devices.
func (p *plan) dev(s *Spec) {
	d := newRoot + "/dev"
	p.step("mount", "tmpfs", d, "tmpfs", num(mountNoExec), "size=64k,mode=0755")
	for _, n := range devices {
		p.step("file", d+"/"+n, "438", "") // 0666
		p.step("bind", oldRoot+"/dev/"+n, d+"/"+n, num(bindWritable))
	}
	p.step("symlink", "/proc/self/fd", d+"/fd")
	for i, n := range []string{"stdin", "stdout", "stderr"} {
		p.step("symlink", "/proc/self/fd/"+strconv.Itoa(i), d+"/"+n)
	}
	p.step("mkdir", d+"/shm", "1023") // 01777
	p.step("mount", "tmpfs", d+"/shm", "tmpfs", num(mountNoExec), fmt.Sprintf("size=%d,mode=1777", s.TmpfsSize))
	p.step("remount_ro", d)
}

// proc mounts the pid namespace's /proc at root+"/proc", its kernel
// knobs read-only and maskedProc masked with empty, a file.
func (p *plan) proc(root, empty string) {
	p.step("mount", "proc", root+"/proc", "proc", num(mountNoExec), "")
	p.procMasks(root, empty)
}

// procMasks makes the knobs of the /proc at root read-only and masks the
// entries that say too much.
func (p *plan) procMasks(root, empty string) {
	// Read-only even for root of the jail: the kernel knobs are no
	// business of the program's, whatever the ownership would say.
	for _, f := range []string{"/proc/sys", "/proc/sysrq-trigger"} {
		p.step("bind", root+f, root+f, num(bindReadOnly|bindOptional))
	}
	for _, f := range maskedProc {
		p.step("mask", empty, root+"/proc/"+f)
	}
}

// scratch mounts the size-capped writable areas (/tmp and the working
// directory) of the root at root; the run's files come later (runPlan).
func (p *plan) scratch(root string, s *Spec, ids idMapping) {
	opts := fmt.Sprintf("size=%d,mode=1777", s.TmpfsSize)
	p.step("mount", "tmpfs", root+"/tmp", "tmpfs", num(mountScratch), opts)
	if !underTmp(s.Workdir) {
		p.step("mount", "tmpfs", root+s.Workdir, "tmpfs", num(mountScratch), fmt.Sprintf("size=%d,mode=0755", s.TmpfsSize))
	}
	p.scratchDir(root, s.Workdir, ids, map[string]bool{"/": true, "/tmp": true})
}

// zygotePlan is what the PID 1 of a zygote's child does in the
// template's root before the child's program goes on (nsinit/zygote.c): what a cold run's mountPlan makes for its namespaces,
// made again for the child's own: loopback, hostname, /dev/shm, /proc and
// the scratch areas, the working directory owned by ids' program. The
// template's own (the same mounts, in the child's copy of its mount
// namespace) are detached first, not left beneath the run's, where its
// mount table would show them.
func zygotePlan(s *Spec, ids idMapping) *plan {
	p := &plan{}
	p.step("loopback_up")
	p.step("hostname", s.Hostname)
	// The template's /proc, /tmp and working directory are moved under
	// its /dev/shm, and detached with it at once: each detach waits for
	// an expedited RCU grace period (the kernel's namespace_unlock), one a
	// run rather than three or four. The directories they move to are
	// the template's, made by its first run (mkdir takes one that is
	// there), and no run sees them after its detach. A new /proc may be
	// mounted only while one is visible: the template's, moved, still is.
	const old = "/dev/shm/.microbox-detached"
	p.step("mkdir", old, "448")
	p.step("mkdir", old+"/proc", "448")
	p.step("move", "/proc", old+"/proc")
	p.step("mount", "proc", "/proc", "proc", num(mountNoExec), "")
	p.step("mkdir", old+"/tmp", "448")
	p.step("move", "/tmp", old+"/tmp")
	if !underTmp(s.Workdir) {
		p.step("mkdir", old+"/work", "448")
		p.step("move", s.Workdir, old+"/work")
	}
	p.step("umount", "/dev/shm")
	p.step("mount", "tmpfs", "/dev/shm", "tmpfs", num(mountNoExec), fmt.Sprintf("size=%d,mode=1777", s.TmpfsSize))
	p.procMasks("", zygoteEmpty)
	p.scratch("", s, ids)
	return p
}

// scratchDir creates dir (inside a scratch mount, under the prefix the root
// has at that point) owned by the program.
func (p *plan) scratchDir(prefix, dir string, ids idMapping, made map[string]bool) {
	if made[dir] || !path.IsAbs(dir) {
		return
	}
	p.scratchDir(prefix, path.Dir(dir), ids, made)
	p.step("mkdir", prefix+dir, "493")
	uid, gid := ids.owner()
	p.step("chown", prefix+dir, uid, gid)
	made[dir] = true
}

// underTmp reports whether p is /tmp or inside it.
func underTmp(p string) bool { return p == "/tmp" || strings.HasPrefix(p, "/tmp/") }

// exec records what the program's process execs.
func (p *plan) exec(s *Spec) {
	p.step("path", s.Argv[0])
	for _, a := range s.Argv {
		p.step("arg", a)
	}
	for _, e := range s.Env {
		p.step("env", e)
	}
}

// sandboxPlan records how the program's process sandboxes itself before
// its execve: its working directory, user, limits and seccomp filters.
func sandboxPlan(s *Spec, ids idMapping, seccompBPF []byte) *plan {
	p := &plan{}
	p.step("cwd", s.Workdir)
	if ids.rootless {
		p.step("user", num(ids.programUID), num(ids.programGID), "0")
		p.step("nested_userns")
	} else {
		p.step("user", num(ids.programUID), num(ids.programGID), "1")
	}
	for _, r := range s.Rlimits.settings() {
		p.step("rlimit", num(r[0]), num(r[1]), num(r[1]))
	}
	if seccompBPF != nil {
		p.stepBytes("seccomp", seccompBPF)
	}
	return p
}
