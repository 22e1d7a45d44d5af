package doctor

// The host and its user namespaces.

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// checkHost names the kernel and whether microbox runs in a container.
func (d *doctor) checkHost() {
	detail := fmt.Sprintf("Linux %s, uid %d", kernel(), os.Geteuid())
	if c := container(); c != "" {
		detail += ", inside a container (" + c + ")"
	}
	d.add("host", OK, detail, "")
}

// kernel is the running kernel's release.
func kernel() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "unknown"
	}
	return unix.ByteSliceToString(u.Release[:])
}

// kernelAtLeast reports whether a kernel release ("6.1.0-18-amd64") is
// major.minor or later.
func kernelAtLeast(release string, major, minor int) bool {
	var maj, min int
	fmt.Sscanf(release, "%d.%d", &maj, &min)
	return maj > major || (maj == major && min >= minor)
}

// container guesses the container runtime microbox runs in, if any.
func container() string {
	switch {
	case exists("/.dockerenv"):
		return "docker"
	case exists("/run/.containerenv"):
		return "podman"
	case exists("/proc/vz") && !exists("/proc/bc"):
		return "openvz"
	case os.Getenv("KUBERNETES_SERVICE_HOST") != "":
		return "kubernetes"
	case os.Getenv("container") != "":
		return os.Getenv("container")
	}
	return ""
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// procSys is where sysctl reads; tests move it.
var procSys = "/proc/sys/"

// sysctl reads /proc/sys/NAME (dots as slashes); ok is false when the
// kernel has no such setting.
func sysctl(name string) (int, bool) {
	b, err := os.ReadFile(procSys + strings.ReplaceAll(name, ".", "/"))
	if err != nil {
		return 0, false
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return v, err == nil
}

// checkUserNS reports the three settings that can forbid user namespaces,
// then creates one.
func (d *doctor) checkUserNS() {
	if v, ok := sysctl("user.max_user_namespaces"); !ok {
		d.add("userns.max", OK, "user.max_user_namespaces not present", "")
	} else if v == 0 {
		d.add("userns.max", Fail, "user.max_user_namespaces = 0: nobody may create user namespaces",
			"sysctl -w user.max_user_namespaces=15000 (and set it in /etc/sysctl.d/)")
	} else {
		d.add("userns.max", OK, fmt.Sprintf("user.max_user_namespaces = %d", v), "")
	}
	for _, r := range restrictions() {
		d.checkRestriction(r, os.Geteuid() == 0)
	}
	if err := probeUserNS(); err != nil {
		d.add("userns.create", Fail, "creating a user namespace failed: "+err.Error(),
			"fix the settings above; in a container, whose runtime's default seccomp profile refuses user namespaces, give it deploy/seccomp/microbox.json: Kubernetes securityContext.seccompProfile {type: Localhost, localhostProfile: microbox.json}; docker/podman --security-opt seccomp=deploy/seccomp/microbox.json (and AppArmor unconfined where it is enforced)")
	} else {
		d.add("userns.create", OK, "a user namespace can be created", "")
	}
}

// restriction is a sysctl that can forbid unprivileged users the user
// namespaces a run needs; it never binds root.
type restriction struct {
	check, sysctl string
	allow         int    // the value that forbids nothing
	absent        string // what the setting's absence tells, if anything
	denied, fix   string // what any other value forbids, and how to lift it
}

// restrictions are Debian's and Ubuntu's switch for unprivileged user
// namespaces, and AppArmor's.
func restrictions() []restriction {
	exe, _ := os.Executable()
	return []restriction{{check: "userns.unprivileged", sysctl: "kernel.unprivileged_userns_clone", allow: 1,
		absent: " (no Debian/Ubuntu restriction)",
		denied: "unprivileged users may not create user namespaces",
		fix:    "sysctl -w kernel.unprivileged_userns_clone=1 (and set it in /etc/sysctl.d/), or run as root",
	}, {check: "userns.apparmor", sysctl: "kernel.apparmor_restrict_unprivileged_userns", allow: 0,
		denied: "AppArmor denies unprivileged user namespaces their capabilities, so the jail cannot mount",
		fix:    fmt.Sprintf("sysctl -w kernel.apparmor_restrict_unprivileged_userns=0, or an AppArmor profile for microbox: /etc/apparmor.d/microbox with 'abi <abi/4.0>, include <tunables/global> profile microbox %s flags=(unconfined) { userns, }' then apparmor_parser -r /etc/apparmor.d/microbox", exe),
	}}
}

func (d *doctor) checkRestriction(r restriction, root bool) {
	switch v, ok := sysctl(r.sysctl); {
	case !ok:
		d.add(r.check, OK, r.sysctl+" not present"+r.absent, "")
	case v == r.allow:
		d.add(r.check, OK, fmt.Sprintf("%s = %d", r.sysctl, v), "")
	case root:
		d.add(r.check, OK, fmt.Sprintf("%s = %d, which does not bind root", r.sysctl, v), "")
	default:
		d.add(r.check, Fail, fmt.Sprintf("%s = %d: %s", r.sysctl, v, r.denied), r.fix)
	}
}

// probeUserNS starts this binary in a new user namespace (mapping only the
// caller's own ids) and lets it print its help; only the clone matters.
// The binary is microbox, whose "help" prints and exits.
func probeUserNS() error {
	cmd := exec.Command("/proc/self/exe", "help")
	// No id maps: mapping root's own id takes CAP_SETFCAP, which root's
	// jails with ranges of their own do not need (checkCapabilities says
	// what they do need).
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER}
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	return cmd.Run()
}
