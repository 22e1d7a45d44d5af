package rootfs

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestPackages(t *testing.T) {
	o := BuildOptions{With: []string{"numpy", " pandas", "python3-scipy", "numpy", ""}}
	got, err := o.Packages()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"python3", "python3-numpy", "python3-pandas", "python3-scipy"}
	if !slices.Equal(got, want) {
		t.Errorf("Packages() = %v, want %v", got, want)
	}
	if mods := o.Modules(); !slices.Equal(mods, []string{"numpy", "pandas", "scipy", "numpy"}) {
		t.Errorf("Modules() = %v", mods)
	}
	// Anything but a package name could be read as an apt pattern.
	for _, bad := range []string{"?essential", "numpy,scipy", "a b", "~pimportant", "num;py"} {
		o := BuildOptions{With: []string{bad}}
		if _, err := o.Packages(); err == nil {
			t.Errorf("--with %q accepted", bad)
		}
	}
}

// --lang adds each language's Debian packages once, Python's none; an
// unknown language is refused by name.
func TestPackagesLanguages(t *testing.T) {
	o := BuildOptions{With: []string{"numpy"}, Languages: []string{"cpp", "c", "nodejs", "python", "bash"}}
	got, err := o.Packages()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"python3", "python3-numpy", "g++", "libc6-dev", "gcc", "nodejs", "bash"}
	if !slices.Equal(got, want) {
		t.Errorf("Packages() = %v, want %v", got, want)
	}
	if names := o.LanguageNames(); !slices.Equal(names, []string{"cpp", "c", "node", "bash"}) {
		t.Errorf("LanguageNames() = %v", names)
	}
	if _, err := (&BuildOptions{Languages: []string{"cobol"}}).Packages(); err == nil || !strings.Contains(err.Error(), `"cobol"`) {
		t.Errorf("--lang cobol: %v", err)
	}
}

// withHostApt points the apt and os-release paths at test files.
func withHostApt(t *testing.T, osID, list string, sources map[string]string) {
	t.Helper()
	dir := t.TempDir()
	old := []string{aptSourcesList, aptSourcesDir, osRelease}
	t.Cleanup(func() { aptSourcesList, aptSourcesDir, osRelease = old[0], old[1], old[2] })
	aptSourcesList = filepath.Join(dir, "sources.list")
	aptSourcesDir = filepath.Join(dir, "sources.list.d")
	osRelease = filepath.Join(dir, "os-release")
	os.Mkdir(aptSourcesDir, 0o755)
	os.WriteFile(osRelease, []byte("PRETTY_NAME=\"x\"\nID="+osID+"\n"), 0o644)
	if list != "" {
		os.WriteFile(aptSourcesList, []byte(list), 0o644)
	}
	for name, text := range sources {
		os.WriteFile(filepath.Join(aptSourcesDir, name), []byte(text), 0o644)
	}
}

func TestSourcesFromHostDeb822(t *testing.T) {
	withHostApt(t, "debian", "", map[string]string{
		"debian.sources": `Types: deb
# a comment
URIs: http://mirror.example/debian/
Suites: bookworm bookworm-updates
Components: main

Types: deb
URIs: http://mirror.example/debian-security
Suites: bookworm-security
Components: main
`,
		"off.sources":              "Types: deb\nURIs: http://disabled.example/debian\nSuites: sid\nEnabled: no\n",
		"other.list.disabled-by-x": "deb http://ignored.example/debian bookworm main\n",
	})
	got, err := Sources("bookworm", "")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"deb http://mirror.example/debian bookworm main",
		"deb http://mirror.example/debian bookworm-updates main",
		"deb http://mirror.example/debian-security bookworm-security main",
	}
	if !slices.Equal(got, want) {
		t.Errorf("Sources = %q\nwant %q", got, want)
	}
}

func TestSourcesFromHostOneLine(t *testing.T) {
	withHostApt(t, "debian", "# comment\ndeb-src http://src.example/debian bookworm main\ndeb [arch=amd64 signed-by=/k.gpg] http://one.example/debian bookworm main\ndeb http://sec.example/debian-security bookworm-security main\n", nil)
	got, _ := Sources("trixie", "")
	if got[0] != "deb http://one.example/debian trixie main" || got[2] != "deb http://sec.example/debian-security trixie-security main" {
		t.Errorf("Sources = %q", got)
	}
	if got, _ := Sources("sid", ""); len(got) != 1 {
		t.Errorf("sid has no -updates or -security, got %q", got)
	}
}

// On Ubuntu the host's mirrors carry Ubuntu, not Debian.
func TestSourcesOnOtherDistributions(t *testing.T) {
	withHostApt(t, "ubuntu", "deb http://archive.ubuntu.com/ubuntu jammy main\n", nil)
	got, _ := Sources("bookworm", "")
	if got[0] != "deb "+debianMirror+" bookworm main" {
		t.Errorf("Sources = %q", got)
	}
}

func TestSourcesWithMirror(t *testing.T) {
	got, err := Sources("bookworm", "http://local.example/debian")
	if err != nil || !slices.Equal(got, []string{"deb http://local.example/debian bookworm main"}) {
		t.Errorf("Sources = %q, %v", got, err)
	}
	for _, bad := range []string{"local.example", "http://a b"} {
		if _, err := Sources("bookworm", bad); err == nil {
			t.Errorf("--mirror %q accepted", bad)
		}
	}
}

// reachableDir is a temporary directory the jail could reach: t.TempDir's
// are 0700, which the jail's unprivileged user cannot search.
func reachableDir(t *testing.T) string {
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	os.Chmod(filepath.Dir(dir), 0o755)
	return dir
}

// fakeRoot makes what mmdebstrap leaves behind, in miniature.
func fakeRoot(t *testing.T) string {
	t.Helper()
	dir := reachableDir(t)
	files := map[string]string{
		"etc/passwd":                 "root:x:0:0:root:/root:/bin/bash\n",
		"etc/group":                  "root:x:0:",
		"etc/resolv.conf":            "nameserver 10.0.0.1\n",
		"etc/apt/sources.list":       "deb x y z\n",
		"var/lib/dpkg/status":        "Package: x\n",
		"var/cache/apt/pkgcache.bin": "x",
		"var/log/apt/history.log":    "x",
		"usr/share/man/man1/ls.1":    "x",
		"usr/bin/python3":            "#!fake",
		"usr/bin/su":                 "su",
		"dev/console":                "pretend device",
	}
	for p, body := range files {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, p), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(filepath.Join(dir, "usr/bin/python3"), 0o755)
	os.Chmod(filepath.Join(dir, "usr/bin/su"), 0o4755|os.ModeSetuid)
	os.Symlink("/proc/self/fd", filepath.Join(dir, "dev/fd"))
	return dir
}

func TestFinish(t *testing.T) {
	dir := fakeRoot(t)
	notes, err := Finish(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"etc/resolv.conf", "etc/apt", "var/lib/dpkg", "var/cache/apt", "var/log", "usr/share/man", "dev/console", "dev/fd"} {
		if _, err := os.Lstat(filepath.Join(dir, p)); err == nil {
			t.Errorf("%s survived", p)
		}
	}
	if fi, _ := os.Stat(filepath.Join(dir, "usr/bin/su")); fi.Mode()&os.ModeSetuid != 0 {
		t.Errorf("su is still setuid")
	}
	if fi, err := os.Stat(filepath.Join(dir, "tmp")); err != nil || fi.Mode()&os.ModeSticky == 0 || fi.Mode().Perm() != 0o777 {
		t.Errorf("/tmp: %v %v", fi.Mode(), err)
	}
	passwd, _ := os.ReadFile(filepath.Join(dir, "etc/passwd"))
	group, _ := os.ReadFile(filepath.Join(dir, "etc/group"))
	if !strings.HasSuffix(string(passwd), "\nsandbox:x:1000:1000:sandbox:/tmp:/usr/sbin/nologin\n") || !strings.HasSuffix(string(group), "root:x:0:\nsandbox:x:1000:\n") {
		t.Errorf("passwd %q group %q", passwd, group)
	}
	if !strings.Contains(strings.Join(notes, "\n"), "setuid/setgid bits: /usr/bin/su") {
		t.Errorf("notes %q", notes)
	}
	// Finishing again changes nothing: the user is not added twice.
	Finish(dir, true)
	if again, _ := os.ReadFile(filepath.Join(dir, "etc/passwd")); string(again) != string(passwd) {
		t.Errorf("second Finish changed passwd: %q", again)
	}
}

// A root whose /etc/passwd is a symlink out of it must not get the host's
// file rewritten.
func TestFinishDoesNotFollowSymlinksOut(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "passwd")
	os.WriteFile(outside, []byte("host\n"), 0o644)
	dir := fakeRoot(t)
	os.Remove(filepath.Join(dir, "etc/passwd"))
	os.Symlink(outside, filepath.Join(dir, "etc/passwd"))
	Finish(dir, false)
	if b, _ := os.ReadFile(outside); string(b) != "host\n" {
		t.Fatalf("Finish wrote through a symlink out of the root: %q", b)
	}
}

func TestPrepareAndInstall(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "sub", "rootfs")
	if err := PrepareTarget(dir, false); err != nil {
		t.Fatal(err)
	}
	stage := StagePath(dir)
	os.MkdirAll(filepath.Join(stage, "usr"), 0o755)
	if err := Install(stage, dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "usr")); err != nil {
		t.Fatal(err)
	}
	if err := PrepareTarget(dir, false); err == nil || !strings.Contains(err.Error(), "pass Replace") {
		t.Errorf("a non-empty target was accepted without --replace: %v", err)
	}
	if err := PrepareTarget(dir, true); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(stage, "new"), 0o555)
	if err := Install(stage, dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "new")); err != nil {
		t.Errorf("the new root is not in place: %v", err)
	}
	if _, err := os.Stat(filepath.Join(OldPath(dir), "usr")); err != nil {
		t.Errorf("the replaced root is not kept for runs in flight: %v", err)
	}
	if entries, _ := os.ReadDir(filepath.Join(parent, "sub")); len(entries) != 2 {
		t.Errorf("left behind: %v", entries)
	}
	for _, bad := range []string{"relative", "/", "/a/../b"} {
		if err := PrepareTarget(bad, false); err == nil {
			t.Errorf("PrepareTarget(%q) accepted", bad)
		}
	}
}

// A stage with something mounted in it (an interrupted mmdebstrap's /proc)
// is not removed through the mount.
func TestRemoveTreeRefusesMounts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	dir := filepath.Join(t.TempDir(), "stage with space")
	os.MkdirAll(filepath.Join(dir, "proc"), 0o755)
	if err := unix.Mount("tmpfs", filepath.Join(dir, "proc"), "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	defer unix.Unmount(filepath.Join(dir, "proc"), unix.MNT_DETACH)
	os.WriteFile(filepath.Join(dir, "proc", "precious"), []byte("x"), 0o644)
	if err := RemoveTree(dir); err == nil || !strings.Contains(err.Error(), "umount -R") {
		t.Fatalf("RemoveTree: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "proc", "precious")); err != nil {
		t.Fatalf("removed through a mount: %v", err)
	}
	unix.Unmount(filepath.Join(dir, "proc"), unix.MNT_DETACH)
	if err := RemoveTree(dir); err != nil {
		t.Fatal(err)
	}
}
