package deploy

// microbox inside its own image, run by an OCI runtime under exactly the
// permissions the Kubernetes manifests ask for (translated as the CRI
// runtimes translate a pod), and under each of them taken away in turn.
// MICROBOX_IMAGE names the image (build/oci:TAG; make test-image builds it
// and sets it); without it these tests skip.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/microbox/microbox/cgroup"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// defaultCaps are what containerd and CRI-O give a container that drops
// none.
var defaultCaps = []string{"CHOWN", "DAC_OVERRIDE", "FSETID", "FOWNER", "MKNOD", "NET_RAW", "SETGID", "SETUID",
	"SETFCAP", "SETPCAP", "NET_BIND_SERVICE", "SYS_CHROOT", "KILL", "AUDIT_WRITE"}

// maskedPaths and readonlyPaths are the runtimes' default /proc masks
// (procMount: Default).
var (
	maskedPaths   = []string{"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/sys/firmware", "/proc/scsi"}
	readonlyPaths = []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}
)

// userNSBase is the host uid a pod's user namespace starts at.
const userNSBase = 200000

// world is what the container tests share: the unpacked image (and a copy
// owned by userNSBase for pods with hostUsers: false), the harnesses, and
// the runtime.
type world struct {
	runtime     string
	root, uroot string // the image's root filesystem, for host users and for a user namespace
	tools       string // static builds of scripts/redteam and scripts/humaneval
	shared      string // ../shared: the red-team corpus and the datasets
	err         error
}

var (
	theWorld  world
	worldOnce sync.Once
)

// TestMain removes the unpacked image the container tests made.
func TestMain(m *testing.M) {
	code := m.Run()
	if theWorld.root != "" {
		os.RemoveAll(filepath.Dir(theWorld.root))
	}
	os.Exit(code)
}

func setup(t *testing.T) *world {
	t.Helper()
	image := os.Getenv("MICROBOX_IMAGE")
	if image == "" {
		t.Skip("MICROBOX_IMAGE is not set: make test-image builds the image and runs these tests in it")
	}
	worldOnce.Do(func() { theWorld.err = theWorld.build(image) })
	if theWorld.err != nil {
		t.Fatal(theWorld.err)
	}
	return &theWorld
}

func (w *world) build(image string) error {
	// crun refuses hybrid hosts ("cgroups in hybrid mode not
	// supported"); runc runs on both.
	w.runtime = "crun"
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err != nil {
		w.runtime = "runc"
	}
	for _, tool := range []string{w.runtime, "umoci"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s is not installed (scripts/deps installs it): %v", tool, err)
		}
	}
	// The jail's unprivileged uid must reach the root: not under a 0700
	// temporary directory.
	dir, err := os.MkdirTemp("/var/tmp", "microbox-container-test-")
	if err != nil {
		return err
	}
	os.Chmod(dir, 0o755)
	w.root, w.uroot, w.tools = filepath.Join(dir, "host"), filepath.Join(dir, "userns"), filepath.Join(dir, "tools")
	steps := [][]string{
		{"umoci", "raw", "unpack", "--image", image, w.root},
		{"cp", "-a", w.root, w.uroot},
		{"chown", "-R", "-h", fmt.Sprintf("%d:%d", userNSBase, userNSBase), w.uroot},
		// Static, as the image's binaries: the image has no libc.
		{"go", "build", "-tags", "netgo,osusergo", "-ldflags", `-linkmode external -extldflags "-static"`, "-o", w.tools + "/", "../scripts/redteam", "../scripts/humaneval"},
	}
	for _, s := range steps {
		cmd := exec.Command(s[0], s[1:]...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%v: %v\n%s", s, err, out)
		}
	}
	os.Chmod(w.root, 0o755)
	os.Chmod(w.uroot, 0o755)
	w.shared, _ = filepath.Abs("../../shared")
	return nil
}

// pod is one container's configuration, as a pod asks for it.
type pod struct {
	spec       corev1.PodSpec
	container  corev1.Container
	rwCgroup   bool              // the runtime mounts the pod's cgroup writable
	mounts     map[string]string // volume name -> host directory
	env        map[string]string // for $(VAR) in the command line
	seccompDir string            // the kubelet's seccomp directory
}

// daemonSetPod is the DaemonSet's pod as written. Its cgroup is writable
// if the runtime honours CRI-O's annotation and can hand a cgroup to a
// user namespace (cgroup v2; never v1).
func daemonSetPod(t *testing.T) pod {
	var ds *appsv1.DaemonSet = loadManifests(t).daemonSet
	p := pod{spec: ds.Spec.Template.Spec, container: ds.Spec.Template.Spec.Containers[0], seccompDir: "seccomp", mounts: map[string]string{}}
	v2 := false
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		v2 = true
	}
	p.rwCgroup = ds.Spec.Template.Annotations["io.kubernetes.cri-o.cgroup2-mount-hierarchy-rw"] == "true" && (v2 || hostUsers(p.spec))
	return p
}

// hostUsersPod is the DaemonSet's pod run in the host's user namespace
// with a writable cgroup, as docker, podman or a bare OCI runtime can run
// it (Kubernetes admits an unmasked /proc only with hostUsers: false):
// without SETFCAP, which only a pod's own user namespace needs.
func hostUsersPod(t *testing.T) pod {
	p := daemonSetPod(t)
	yes := true
	p.spec.HostUsers = &yes
	p.rwCgroup = true
	sc := *p.container.SecurityContext
	caps := *sc.Capabilities
	caps.Add = slices.DeleteFunc(slices.Clone(caps.Add), func(c corev1.Capability) bool { return c == "SETFCAP" })
	sc.Capabilities = &caps
	p.container.SecurityContext = &sc
	return p
}

func hostUsers(s corev1.PodSpec) bool { return s.HostUsers == nil || *s.HostUsers }

var varRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// ociSpec is the OCI configuration a CRI runtime makes of the pod, running
// args (nil: the container's own command line, its $(VAR)s expanded as
// the kubelet does).
func (w *world) ociSpec(t *testing.T, p pod, args []string) *specs.Spec {
	t.Helper()
	c, sc := p.container, p.container.SecurityContext
	if args == nil {
		for _, a := range append(slices.Clone(c.Command), c.Args...) {
			args = append(args, varRef.ReplaceAllStringFunc(a, func(m string) string { return p.env[m[2:len(m)-1]] }))
		}
	}
	caps := slices.Clone(defaultCaps)
	if slices.Contains(sc.Capabilities.Drop, "ALL") {
		caps = nil
	}
	for _, a := range sc.Capabilities.Add {
		caps = append(caps, string(a))
	}
	for i := range caps {
		caps[i] = "CAP_" + caps[i]
	}
	var rl syscall.Rlimit
	syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl)
	s := &specs.Spec{
		Version: specs.Version,
		Process: &specs.Process{
			// HOME: the red-team harness puts its canaries there, and the
			// pod's writable scratch is its /tmp.
			Args: args, Cwd: "/", Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp"},
			Capabilities:    &specs.LinuxCapabilities{Bounding: caps, Effective: caps, Permitted: caps},
			NoNewPrivileges: sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation,
			Rlimits:         []specs.POSIXRlimit{{Type: "RLIMIT_NOFILE", Hard: rl.Max, Soft: rl.Max}},
		},
		Root:     &specs.Root{Path: w.root, Readonly: sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem},
		Hostname: "microbox-pod",
		Linux: &specs.Linux{
			Namespaces: []specs.LinuxNamespace{{Type: "pid"}, {Type: "network"}, {Type: "ipc"}, {Type: "uts"}, {Type: "mount"}, {Type: "cgroup"}},
			Resources:  &specs.LinuxResources{Devices: []specs.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}}},
		},
	}
	if sc.ProcMount == nil || *sc.ProcMount != corev1.UnmaskedProcMount {
		s.Linux.MaskedPaths, s.Linux.ReadonlyPaths = maskedPaths, readonlyPaths
	}
	if !hostUsers(p.spec) {
		s.Root.Path = w.uroot
		s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: "user"})
		m := []specs.LinuxIDMapping{{ContainerID: 0, HostID: userNSBase, Size: 65536}}
		s.Linux.UIDMappings, s.Linux.GIDMappings = m, m
	}
	if mem := c.Resources.Limits.Memory().Value(); mem > 0 {
		s.Linux.Resources.Memory = &specs.LinuxMemory{Limit: &mem}
	}
	s.Linux.Seccomp = w.seccomp(t, p)
	cgroupMode := "ro"
	if p.rwCgroup {
		cgroupMode = "rw"
	}
	s.Mounts = []specs.Mount{
		{Destination: "/proc", Type: "proc", Source: "proc"},
		{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
		// As containerd's and CRI-O's default specs have it.
		{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}},
		{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
		{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
		{Destination: "/sys/fs/cgroup", Type: "cgroup", Source: "cgroup", Options: []string{"nosuid", "noexec", "nodev", "relatime", cgroupMode}},
	}
	if !hostUsers(p.spec) { // a user namespace may not mount sysfs of the host's network namespace... nor v1 cgroups it does not own
		s.Mounts = s.Mounts[:3]
		if p.rwCgroup {
			s.Mounts = append(s.Mounts, specs.Mount{Destination: "/sys/fs/cgroup", Type: "cgroup2", Source: "cgroup2", Options: []string{"nosuid", "noexec", "nodev", "rw"}})
		}
	}
	s.Mounts = append(s.Mounts, w.volumeMounts(p)...)
	return s
}

// volumeMounts are the container's volumes: emptyDirs as tmpfs, the
// others bound from p.mounts (shared/ and the tools always, read-only).
func (w *world) volumeMounts(p pod) []specs.Mount {
	var ms []specs.Mount
	for _, vm := range p.container.VolumeMounts {
		i := slices.IndexFunc(p.spec.Volumes, func(v corev1.Volume) bool { return v.Name == vm.Name })
		if i >= 0 && p.spec.Volumes[i].EmptyDir != nil {
			ms = append(ms, specs.Mount{Destination: vm.MountPath, Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "nodev", "mode=1777"}})
		} else if dir, ok := p.mounts[vm.Name]; ok {
			opt := "rw"
			if vm.ReadOnly {
				opt = "ro"
			}
			ms = append(ms, specs.Mount{Destination: vm.MountPath, Type: "bind", Source: dir, Options: []string{"rbind", opt}})
		}
	}
	for dst, src := range map[string]string{"/shared": w.shared, "/tools": w.tools} {
		ms = append(ms, specs.Mount{Destination: dst, Type: "bind", Source: src, Options: []string{"rbind", "ro"}})
	}
	return ms
}

// seccomp is the pod's profile: Localhost profiles come from the
// kubelet's seccomp directory (here deploy/seccomp), Unconfined is none.
func (w *world) seccomp(t *testing.T, p pod) *specs.LinuxSeccomp {
	prof := p.container.SecurityContext.SeccompProfile
	switch {
	case prof == nil || prof.Type == corev1.SeccompProfileTypeRuntimeDefault:
		t.Fatal("seccompProfile RuntimeDefault: the runtime's own profile refuses user namespaces, and is not reproduced here")
	case prof.Type == corev1.SeccompProfileTypeUnconfined:
		return nil
	}
	data, err := os.ReadFile(filepath.Join(p.seccompDir, *prof.LocalhostProfile))
	if err != nil {
		t.Fatal(err)
	}
	var s specs.LinuxSeccomp
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	return &s
}

var containerSeq int

// start starts the container of spec s; wait for it with the returned
// command.
func (w *world) start(t *testing.T, s *specs.Spec) (string, *exec.Cmd) {
	t.Helper()
	bundle := t.TempDir()
	data, _ := json.Marshal(s)
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	containerSeq++
	id := fmt.Sprintf("microbox-test-%d-%d", os.Getpid(), containerSeq)
	cmd := exec.Command(w.runtime, "run", "--bundle", bundle, id)
	return id, cmd
}

// run runs args in a container of the pod and returns its stdout, stderr
// and exit status.
func (w *world) run(t *testing.T, p pod, args ...string) (string, string, int) {
	t.Helper()
	_, cmd := w.start(t, w.ociSpec(t, p, args))
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), code
}

// doctorReport runs microbox doctor --json (with args) in the pod.
func (w *world) doctorReport(t *testing.T, p pod, args ...string) (map[string]string, string) {
	out, errOut, _ := w.run(t, p, append([]string{"/usr/local/bin/microbox", "doctor", "--json"}, args...)...)
	var rep struct {
		Checks []struct{ Name, Status, Detail, Fix string }
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("doctor: %v\n%s%s", err, out, errOut)
	}
	status := map[string]string{}
	var lines []string
	for _, c := range rep.Checks {
		status[c.Name] = c.Status
		lines = append(lines, fmt.Sprintf("%s %s: %s — %s", c.Status, c.Name, c.Detail, c.Fix))
	}
	return status, strings.Join(lines, "\n")
}

// In the DaemonSet's pod without a user namespace of its own, doctor says
// runs work, and the red-team corpus and HumanEval's canonical solutions
// pass in it, run in-process.
func TestContainerHostUsers(t *testing.T) {
	w := setup(t)
	p := hostUsersPod(t)
	if status, report := w.doctorReport(t, p); slices.Contains(mapValues(status), "fail") {
		t.Fatalf("doctor in the pod:\n%s", report)
	}
	for _, job := range [][]string{
		{"/tools/redteam", "-corpus", "/shared/redteam", "-microbox", "/usr/local/bin/microbox"},
		{"/tools/humaneval", "-microbox", "/usr/local/bin/microbox", "-data", "/shared/datasets", "canonical"},
	} {
		start := time.Now()
		out, errOut, code := w.run(t, p, job...)
		t.Logf("%s in the container: exit %d in %s; %s", filepath.Base(job[0]), code, time.Since(start).Round(time.Second), lastLine(out))
		if code != 0 || !strings.Contains(out, " 0 failed") {
			t.Errorf("%s: exit %d\n%s\n%s", job[0], code, out, errOut)
		}
	}
}

// The same pod running microbox serve (the server's Unix socket): a
// client's run is the server's child, and HumanEval's canonical solutions
// pass through it.
func TestContainerServe(t *testing.T) {
	w := setup(t)
	p := hostUsersPod(t)
	id, server := w.start(t, w.ociSpec(t, p, []string{"/usr/local/bin/microbox", "serve", "--warm", "2"}))
	var log strings.Builder
	server.Stdout, server.Stderr = &log, &log
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			exec.Command(w.runtime, "kill", id, "KILL").Run()
			server.Wait()
		}
		exec.Command(w.runtime, "delete", "-f", id).Run()
	}()
	exe := func(args ...string) *exec.Cmd {
		return exec.Command(w.runtime, append([]string{"exec", id}, args...)...)
	}
	time.Sleep(time.Second)
	sleeper := exe("/usr/local/bin/microbox", "exec", "--timeout", "20s", "-c", "import time; time.sleep(15) # microbox-serve-probe")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { sleeper.Process.Kill(); sleeper.Wait() }()
	serverPid := containerPid(t, w.runtime, id)
	var chain []int
	for range 50 {
		if chain = ancestors(findProcess("microbox-serve-probe")); len(chain) > 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	// python3's parent is the jail's PID 1, whose parent is the server.
	if len(chain) < 2 || chain[1] != serverPid {
		t.Fatalf("the client's program has ancestors %v, want the jail's PID 1 then the server (pid %d)\n%s", chain, serverPid, log.String())
	}
	out, errOut := new(strings.Builder), new(strings.Builder)
	he := exe("/tools/humaneval", "-microbox", "/usr/local/bin/microbox", "-data", "/shared/datasets", "canonical")
	he.Stdout, he.Stderr = out, errOut
	if err := he.Run(); err != nil || !strings.Contains(out.String(), " 0 failed") {
		t.Errorf("HumanEval canonical through the server: %v\n%s%s\nserver: %s", err, out, errOut, log.String())
	}
	t.Logf("HumanEval canonical through microbox serve in the container: %s", lastLine(out.String()))
	// A run forked from a warm interpreter: the server keeps the
	// template, and a child forked ahead, until it stops.
	zout, _ := exe("/usr/local/bin/microbox", "exec", "--zygote", "--json", "-c", "print(6 * 7)").Output()
	var z struct{ Status, Stdout, Start string }
	if err := json.Unmarshal(zout, &z); err != nil || z.Status != "ok" || z.Stdout != "42\n" || z.Start != "zygote" {
		t.Errorf("a forked run in the container: %v %v %s\nserver: %s", err, z, zout, log.String())
	}
	// SIGTERM stops the server: it kills its jails and templates (as
	// their owner: the pod grants no CAP_KILL), those it started ahead
	// included, and removes their cgroups before it exits.
	sleeper.Process.Kill()
	sleeper.Wait()
	exec.Command(w.runtime, "kill", id, "TERM").Run()
	waited := make(chan error, 1)
	go func() { waited <- server.Wait() }()
	select {
	case <-waited:
		stopped = true
	case <-time.After(30 * time.Second):
		t.Fatalf("the server still ran 30 s after SIGTERM\nserver: %s", log.String())
	}
	if left := jailGroups(id); len(left) > 0 {
		t.Errorf("the stopped server left run cgroups: %v\nserver: %s", left, log.String())
	}
}

// jailGroups lists the run cgroups under the container's own (runc names
// the container's cgroup after its id).
func jailGroups(id string) []string {
	var found []string
	filepath.WalkDir("/sys/fs/cgroup", func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && cgroup.IsRunGroup(d.Name()) && strings.Contains(p, "/"+id+"/") {
			found = append(found, p)
		}
		return nil
	})
	return found
}

// The Indexed Job's exact command lines, one container per completion
// index, in the Job's pod (a user namespace of its own, no cgroup), over
// HumanEval's canonical solutions; the merge gives pass@1 = 1.
func TestContainerIndexedJob(t *testing.T) {
	w := setup(t)
	job := loadManifests(t).job
	p := pod{spec: job.Spec.Template.Spec, container: job.Spec.Template.Spec.Containers[0], seccompDir: "seccomp"}
	data := filepath.Join(w.tools, "..", "job-data")
	os.MkdirAll(filepath.Join(data, "results"), 0o755)
	if err := writeCanonicalSamples(filepath.Join(w.shared, "datasets", "HumanEval.jsonl.gz"), data); err != nil {
		t.Fatal(err)
	}
	// The pod's root is uid userNSBase on the host.
	exec.Command("chown", "-R", fmt.Sprintf("%d:%d", userNSBase, userNSBase), data).Run()
	p.mounts = map[string]string{"data": data}
	var results []string
	for i := range int(*job.Spec.Completions) {
		p.env = map[string]string{"JOB_COMPLETION_INDEX": fmt.Sprint(i)}
		_, errOut, code := w.run(t, p)
		if code != 0 {
			t.Fatalf("completion %d: exit %d\n%s", i, code, errOut)
		}
		results = append(results, fmt.Sprintf("/data/results/shard-%d.jsonl", i))
	}
	out, errOut, code := w.run(t, p, append([]string{"/usr/local/bin/microbox", "eval", "merge", "-k", "1"}, results...)...)
	if code != 0 || strings.TrimSpace(out) != `{"pass@1": 1}` {
		t.Fatalf("merge: exit %d, %q\n%s", code, out, errOut)
	}
	t.Logf("the Job's %d shards merged: %s %s", *job.Spec.Completions, strings.TrimSpace(out), lastLine(errOut))
}

// Each permission the manifests grant, taken away: doctor fails the check
// that names it (its fix says how to grant it), and a run fails closed.
func TestContainerPermissions(t *testing.T) {
	w := setup(t)
	type drop struct {
		name, check string
		pod         func(t *testing.T) pod
		change      func(p *pod)
	}
	dropCap := func(c corev1.Capability) func(p *pod) {
		return func(p *pod) {
			sc := *p.container.SecurityContext
			caps := *sc.Capabilities
			caps.Add = slices.DeleteFunc(slices.Clone(caps.Add), func(a corev1.Capability) bool { return a == c })
			sc.Capabilities = &caps
			p.container.SecurityContext = &sc
		}
	}
	setSC := func(f func(sc *corev1.SecurityContext)) func(p *pod) {
		return func(p *pod) {
			sc := *p.container.SecurityContext
			f(&sc)
			p.container.SecurityContext = &sc
		}
	}
	drops := []drop{
		{"CAP_SETUID", "capabilities", hostUsersPod, dropCap("SETUID")},
		{"CAP_SETGID", "capabilities", hostUsersPod, dropCap("SETGID")},
		{"CAP_SETPCAP", "capabilities", hostUsersPod, dropCap("SETPCAP")},
		{"CAP_SETFCAP (hostUsers: false)", "capabilities", daemonSetPod, dropCap("SETFCAP")},
		{"procMount: Unmasked", "proc.masks", hostUsersPod, setSC(func(sc *corev1.SecurityContext) { m := corev1.DefaultProcMount; sc.ProcMount = &m })},
		{"the seccomp profile", "userns.create", hostUsersPod, func(p *pod) { p.seccompDir = "testdata/runtime-default" }},
		{"a writable cgroup", "cgroup.delegation", hostUsersPod, func(p *pod) { p.rwCgroup = false }},
	}
	for _, d := range drops {
		t.Run(strings.Fields(d.name)[0], func(t *testing.T) {
			p := d.pod(t)
			d.change(&p)
			status, report := w.doctorReport(t, p)
			if status[d.check] != "fail" {
				t.Errorf("without %s, doctor's %s is %q:\n%s", d.name, d.check, status[d.check], report)
			}
			out, _, code := w.run(t, p, "/usr/local/bin/microbox", "exec", "--json", "-c", "print(1)")
			if code != 125 || !strings.Contains(out, `"status":"sandbox_error"`) {
				t.Errorf("without %s, a run: exit %d %s", d.name, code, out)
			}
			t.Logf("without %s: %s", d.name, lineOf(report, d.check))
		})
	}
}

func mapValues(m map[string]string) []string {
	var v []string
	for _, s := range m {
		v = append(v, s)
	}
	return v
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func lineOf(report, check string) string {
	for _, l := range strings.Split(report, "\n") {
		if strings.HasPrefix(l, "fail "+check+":") {
			return l
		}
	}
	return "(no failed " + check + " line)"
}
