package rootfs

// Building a Debian Python root with mmdebstrap, and what every prepared
// root (built or imported) gets afterwards: the directories the jail mounts
// onto, a sandbox user, no setuid bits, no package-manager state, and a
// manifest. Building and importing happen in a staging directory beside
// the target, which is moved into place only once it has passed its check.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/microbox/microbox/field"
	"github.com/microbox/microbox/internal/lang"
)

// SystemDir is where `exec` looks for a root when neither --rootfs nor
// $MICROBOX_ROOTFS names one; production hosts build there.
const SystemDir = "/var/lib/microbox/rootfs"

// EnvRootfs names a root for every `exec` that passes no --rootfs.
const EnvRootfs = "MICROBOX_ROOTFS"

// ManifestPath is where a prepared root records what it is.
const ManifestPath = "/etc/microbox-rootfs.json"

// Manifest says what a root holds and how it was made.
type Manifest struct {
	Format  int       `json:"format"`
	Kind    string    `json:"kind"` // "build" or "import"
	Created time.Time `json:"created"`
	// Python is the interpreter's version as it reported itself in the
	// sandbox when the root was checked.
	Python string `json:"python,omitempty"`

	// A built root.
	Suite        string   `json:"suite,omitempty"`
	Architecture string   `json:"architecture,omitempty"`
	Sources      []string `json:"sources,omitempty"`
	Tool         string   `json:"tool,omitempty"`
	With         []string `json:"with,omitempty"`      // extras as asked for (numpy, ...)
	Languages    []string `json:"languages,omitempty"` // besides Python (internal/lang's names)
	Packages     []string `json:"packages,omitempty"`  // "name version", every installed package

	// An imported root.
	Image *ImageInfo `json:"image,omitempty"`

	// Notes say what microbox changed or left out while making the root.
	Notes []string `json:"notes,omitempty"`
}

// ReadManifest reads a root's manifest; a root without one (made by hand)
// gives an error satisfying errors.Is(err, fs.ErrNotExist).
func ReadManifest(dir string) (*Manifest, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	data, err := r.ReadFile(strings.TrimPrefix(ManifestPath, "/"))
	if err != nil {
		return nil, err
	}
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%s%s: %w", dir, ManifestPath, err)
	}
	return &m, nil
}

// WriteManifest writes m into the root at dir.
func WriteManifest(dir string, m *Manifest) error {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	r, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer r.Close()
	return writeFileInRoot(r, strings.TrimPrefix(ManifestPath, "/"), append(data, '\n'), 0o644)
}

// BuildOptions say what `rootfs build` puts into a root.
type BuildOptions struct {
	Suite string // Debian release, e.g. bookworm
	// Mirror is a Debian archive URL; "" uses the host's own apt mirrors
	// (with SUITE-updates and SUITE-security), since on many hosts only
	// those are reachable.
	Mirror string
	// With are extra Python packages by their Debian names without the
	// python3- prefix (numpy, pandas, scipy) or with it.
	With []string
	// Languages are languages besides Python whose tools the root gets
	// (internal/lang: c, cpp, bash, node).
	Languages []string
	// Log receives mmdebstrap's output and microbox's step lines; an
	// *os.File that is a terminal gets mmdebstrap's progress display.
	Log io.Writer
}

// debianName is what apt accepts as a package name; anything else could
// be read by mmdebstrap as an apt pattern.
var debianName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9.+-]+$`) })

// Packages returns the Debian packages a build installs: python3 (the whole
// standard library, not python3-minimal) and the extras.
func (o *BuildOptions) Packages() ([]string, error) {
	pkgs := []string{"python3"}
	for _, w := range o.With {
		w = strings.TrimSpace(w)
		if w == "" {
			continue
		}
		name := w
		if !strings.HasPrefix(name, "python3-") {
			name = "python3-" + strings.ToLower(name)
		}
		if !debianName().MatchString(name) {
			return nil, field.Errorf("With", "{With} %q is not a Debian package name", w)
		}
		if !slices.Contains(pkgs, name) {
			pkgs = append(pkgs, name)
		}
	}
	langs, err := o.languages()
	if err != nil {
		return nil, err
	}
	for _, l := range langs {
		for _, p := range l.Packages {
			if !slices.Contains(pkgs, p) {
				pkgs = append(pkgs, p)
			}
		}
	}
	return pkgs, nil
}

// languages are Languages looked up (Python left out: every root has it).
func (o *BuildOptions) languages() ([]*lang.Language, error) {
	var langs []*lang.Language
	for _, name := range o.Languages {
		l, err := lang.Lookup(strings.TrimSpace(name))
		if err != nil {
			return nil, field.Errorf("Languages", "{Languages}: %v", err)
		}
		if !l.IsPython() && !slices.Contains(langs, l) {
			langs = append(langs, l)
		}
	}
	return langs, nil
}

// LanguageNames are Languages by their canonical names, for the manifest.
func (o *BuildOptions) LanguageNames() []string {
	langs, _ := o.languages() // Packages refused bad names first
	var names []string
	for _, l := range langs {
		names = append(names, l.Name)
	}
	return names
}

// Modules are the Python module names the extras are expected to provide
// (numpy for python3-numpy); a build imports them to check the result.
func (o *BuildOptions) Modules() []string {
	var mods []string
	for _, w := range o.With {
		if w = strings.TrimPrefix(strings.ToLower(strings.TrimSpace(w)), "python3-"); w != "" {
			mods = append(mods, w)
		}
	}
	return mods
}

// Paths dpkg never writes into a built root: documentation (but not the
// copyright files, which the licences ask to keep), manuals, translations.
var dpkgExcludes = []string{
	"path-exclude=/usr/share/doc/*",
	"path-include=/usr/share/doc/*/copyright",
	"path-exclude=/usr/share/man/*",
	"path-exclude=/usr/share/info/*",
	"path-exclude=/usr/share/locale/*",
	"path-exclude=/usr/share/lintian/*",
}

// compileHook byte-compiles everything under /usr/lib/python3* that the
// packages' own postinst (py3compile) left uncompiled. The root is
// read-only at run time, so a module without a valid .pyc is compiled
// again on every import. Timestamp-based .pyc (what the import system
// checks cheaply) match the installed files' mtimes.
const compileHook = `chroot "$1" sh -c 'python3 -m compileall -q --invalidation-mode timestamp /usr/lib/python3*' ` +
	`|| echo "microbox: warning: some Python files did not compile" >&2`

// factsFile is where the build's hook leaves what only the chroot knows.
const factsFile = ".microbox-build-facts"

// factsHook records the installed packages and the architecture before the
// package database is removed.
const factsHook = `{ chroot "$1" dpkg --print-architecture; chroot "$1" dpkg-query -W -f '${Package} ${Version}\n'; } > "$1/` + factsFile + `"`

// Build makes a Debian root with python3 and the extras in stage, which
// must not exist yet, and prepares it for the jail (see Finish). The
// caller checks it and moves it into place.
func Build(ctx context.Context, stage string, o BuildOptions) (*Manifest, error) {
	mm, err := exec.LookPath("mmdebstrap")
	if err != nil {
		return nil, errors.New("mmdebstrap is not installed: apt-get install mmdebstrap (scripts/deps does)")
	}
	if o.Suite == "" {
		o.Suite = "bookworm"
	}
	if !debianName().MatchString(o.Suite) {
		return nil, field.Errorf("Suite", "{Suite} %q is not a Debian suite name", o.Suite)
	}
	pkgs, err := o.Packages()
	if err != nil {
		return nil, err
	}
	sources, err := Sources(o.Suite, o.Mirror)
	if err != nil {
		return nil, err
	}
	log := o.Log
	if log == nil {
		log = io.Discard
	}
	args := mmdebstrapArgs(pkgs)
	if os.Geteuid() == 0 {
		err = runMmdebstrap(ctx, mm, append(args, "--mode=root", "--format=directory", o.Suite, stage), sources, nil, log)
	} else {
		err = buildUnshared(ctx, mm, args, o.Suite, stage, sources, log)
	}
	if err != nil {
		return nil, err
	}
	m := &Manifest{Kind: "build", Suite: o.Suite, Sources: sources, With: o.With, Languages: o.LanguageNames(), Tool: toolVersion(mm)}
	if err := readFacts(stage, m); err != nil {
		return nil, err
	}
	notes, err := Finish(stage, true)
	m.Notes = notes
	return m, err
}

func mmdebstrapArgs(pkgs []string) []string {
	args := []string{"--variant=essential", "--include=" + strings.Join(pkgs, ",")}
	// Without it, bookworm's essential set pulls in usrmerge and with it
	// perl, which a Python root does not need.
	if fi, err := os.Stat("/usr/share/mmdebstrap/hooks/maybe-merged-usr"); err == nil && fi.IsDir() {
		args = append(args, "--hook-dir=/usr/share/mmdebstrap/hooks/maybe-merged-usr")
	}
	// The root is moved into place only when complete, so dpkg need not
	// sync every file it writes; eatmydata (when installed) removes the
	// syncs dpkg still makes, which dominate on virtual disks.
	args = append(args, "--dpkgopt=force-unsafe-io")
	if haveEatmydataHook() {
		args = append(args, "--hook-dir="+eatmydataHook)
	}
	for _, x := range dpkgExcludes {
		args = append(args, "--dpkgopt="+x)
	}
	return append(args, "--customize-hook="+compileHook, "--customize-hook="+factsHook)
}

const eatmydataHook = "/usr/share/mmdebstrap/hooks/eatmydata"

// haveEatmydataHook reports whether mmdebstrap's eatmydata hook can run:
// it needs eatmydata and, for the library path, dpkg-architecture.
func haveEatmydataHook() bool {
	for _, tool := range []string{"eatmydata", "dpkg-architecture"} {
		if _, err := exec.LookPath(tool); err != nil {
			return false
		}
	}
	fi, err := os.Stat(eatmydataHook)
	return err == nil && fi.IsDir()
}

// buildUnshared builds without root: mmdebstrap's unshare mode writes a
// tarball, which is unpacked here as the caller, so that every file of the
// root belongs to the caller (a directory written from inside the user
// namespace would belong to subordinate ids the caller cannot remove).
func buildUnshared(ctx context.Context, mm string, args []string, suite, stage string, sources []string, log io.Writer) error {
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		if err := os.Mkdir(stage, 0o755); err != nil {
			pr.CloseWithError(err)
			done <- err
			return
		}
		_, err := extractTar(stage, pr, extractBudget{}) // our own mmdebstrap's output
		if err == nil {
			// tar's end marker may come before the stream's padding.
			_, err = io.Copy(io.Discard, pr)
		}
		pr.CloseWithError(err) // unblocks mmdebstrap if extraction failed
		done <- err
	}()
	err := runMmdebstrap(ctx, mm, append(args, "--mode=unshare", "--format=tar", suite, "-"), sources, pw, log)
	pw.CloseWithError(err)
	if xerr := <-done; err == nil && xerr != nil {
		err = fmt.Errorf("unpack mmdebstrap's tarball: %w", xerr)
	}
	return err
}

// runMmdebstrap runs mmdebstrap with its progress going to log.
func runMmdebstrap(ctx context.Context, mm string, args, sources []string, stdout io.Writer, log io.Writer) error {
	cmd := exec.CommandContext(ctx, mm, append(args, sources...)...)
	// Interrupted, mmdebstrap must clean up (unmount what it mounted in
	// the target), which SIGKILL would not let it do.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = time.Minute
	cmd.Stdout = stdout
	if stdout == nil {
		cmd.Stdout = log
	}
	cmd.Stderr = log
	// SOURCE_DATE_EPOCH would make py_compile write hash-checked .pyc,
	// which re-read every source file at import.
	cmd.Env = slices.DeleteFunc(os.Environ(), func(e string) bool { return strings.HasPrefix(e, "SOURCE_DATE_EPOCH=") })
	if err := cmd.Run(); err != nil {
		return field.Errorf("Mirror", "mmdebstrap failed (%v); its output above says why (if it could not reach %s, pass {Mirror})", err, mirrorOf(sources))
	}
	return nil
}

func mirrorOf(sources []string) string {
	if f := strings.Fields(sources[0]); len(f) > 1 {
		return f[1]
	}
	return sources[0]
}

func toolVersion(mm string) string {
	out, err := exec.Command(mm, "--version").Output()
	if err != nil {
		return "mmdebstrap"
	}
	return strings.TrimSpace(string(out))
}

// readFacts takes the architecture and package list the build's hook left
// in the root, and removes the file.
func readFacts(stage string, m *Manifest) error {
	p := filepath.Join(stage, factsFile)
	data, err := os.ReadFile(p)
	if err != nil {
		return fmt.Errorf("the build left no package list: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	m.Architecture = strings.TrimSpace(lines[0])
	m.Packages = lines[1:]
	return os.Remove(p)
}

// Package-manager state, caches and logs a sandbox never reads, and host
// files mmdebstrap copies in (resolv.conf, hostname).
var stripPaths = []string{
	"var/lib/apt", "var/cache/apt", "var/lib/dpkg", "var/cache/debconf", "var/log",
	"etc/apt", "etc/resolv.conf", "etc/hostname",
	"usr/share/man", "usr/share/info", "usr/share/lintian", "usr/share/locale",
}

// Finish prepares a root for the jail: it makes the directories the jail
// mounts onto (and empties /dev, on which the jail mounts its own), strips
// setuid and setgid bits (a setuid binary in a tree on the host is a way
// to root for any host user who can reach it; in the sandbox, no_new_privs
// makes it inert anyway), adds the sandbox user (uid/gid 1000) to
// /etc/passwd and /etc/group, and, for a built root (strip), removes
// package-manager state, caches and logs. It returns what it changed.
func Finish(dir string, strip bool) ([]string, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var notes []string
	if strip {
		for _, p := range stripPaths {
			if err := r.RemoveAll(p); err != nil {
				return nil, fmt.Errorf("strip %s: %w", p, err)
			}
		}
		notes = append(notes, "removed package-manager state, caches, logs, documentation and translations")
	}
	n, err := emptyDev(r)
	if err != nil {
		return nil, err
	}
	if n > 0 {
		notes = append(notes, fmt.Sprintf("removed %d entries from /dev (the jail mounts its own)", n))
	}
	stripped, err := stripSetid(dir, r)
	if err != nil {
		return nil, err
	}
	if len(stripped) > 0 {
		notes = append(notes, "removed setuid/setgid bits: "+strings.Join(stripped, " "))
	}
	if err := requiredDirs(r); err != nil {
		return nil, err
	}
	added, err := addSandboxUser(r)
	if err != nil {
		return nil, err
	}
	if added {
		notes = append(notes, "added user and group sandbox (1000) to /etc/passwd and /etc/group")
	}
	return notes, nil
}

// emptyDev removes what is in /dev: device nodes have no business in a
// tree on the host, and the jail mounts a tmpfs with its own over it.
func emptyDev(r *os.Root) (int, error) {
	f, err := r.Open("dev")
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("open /dev: %w", err)
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return 0, fmt.Errorf("read /dev: %w", err)
	}
	for _, n := range names {
		if err := r.RemoveAll(path.Join("dev", n)); err != nil {
			return 0, fmt.Errorf("empty /dev: %w", err)
		}
	}
	return len(names), nil
}

// stripSetid clears the setuid and setgid bits of every file that is not a
// directory (on a directory, setgid only passes the group on).
func stripSetid(dir string, r *os.Root) ([]string, error) {
	var stripped []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Type()&fs.ModeSymlink != 0 {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid) == 0 {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		if err := r.Chmod(rel, fi.Mode()&^(fs.ModeSetuid|fs.ModeSetgid)); err != nil {
			return err
		}
		stripped = append(stripped, "/"+rel)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("strip setuid bits: %w", err)
	}
	return stripped, nil
}

// requiredDirs makes the (empty) directories the jail mounts onto.
func requiredDirs(r *os.Root) error {
	for _, d := range RequiredDirs {
		rel := strings.TrimPrefix(d, "/")
		if err := r.MkdirAll(rel, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
		mode := fs.FileMode(0o755)
		if d == "/tmp" {
			mode = 0o777 | fs.ModeSticky
		}
		if err := r.Chmod(rel, mode); err != nil {
			return fmt.Errorf("chmod %s: %w", d, err)
		}
	}
	return nil
}

// addSandboxUser names uid and gid 1000 "sandbox" in the root's /etc, so
// that getpwuid() (getpass.getuser, ~ expansion, some libraries' cache
// directories) works for the program; a root that already has an entry
// for 1000 keeps it.
func addSandboxUser(r *os.Root) (bool, error) {
	passwd, err := addEntry(r, "etc/passwd", 2, "sandbox:x:1000:1000:sandbox:/tmp:/usr/sbin/nologin")
	if err != nil {
		return false, err
	}
	group, err := addEntry(r, "etc/group", 2, "sandbox:x:1000:")
	if err != nil {
		return false, err
	}
	return passwd || group, nil
}

// addEntry appends line to a colon-separated database unless some line
// already has id 1000 in field idField.
func addEntry(r *os.Root, name string, idField int, line string) (bool, error) {
	data, err := r.ReadFile(name)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("read /%s: %w", name, err)
	}
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	for sc.Scan() {
		if f := strings.Split(sc.Text(), ":"); len(f) > idField && f[idField] == "1000" {
			return false, nil
		}
	}
	if len(data) > 0 && data[len(data)-1] != '\n' {
		data = append(data, '\n')
	}
	data = append(data, line+"\n"...)
	if err := r.MkdirAll("etc", 0o755); err != nil {
		return false, err
	}
	return true, writeFileInRoot(r, name, data, 0o644)
}

// writeFileInRoot replaces name inside r. It writes a new file and renames
// it over the old one, so a symlink at name is replaced, never followed.
func writeFileInRoot(r *os.Root, name string, data []byte, mode fs.FileMode) error {
	tmp := name + ".microbox-new"
	r.Remove(tmp)
	f, err := r.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return fmt.Errorf("write /%s: %w", name, err)
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = r.Chmod(tmp, mode)
	}
	if err == nil {
		err = r.Rename(tmp, name)
	}
	if err != nil {
		r.Remove(tmp)
		return fmt.Errorf("write /%s: %w", name, err)
	}
	return nil
}

// StagePath is where a root for dir is assembled before it is moved into
// place: beside dir, so the move is a rename on the same filesystem.
func StagePath(dir string) string {
	return filepath.Join(filepath.Dir(dir), "."+filepath.Base(dir)+".microbox-new")
}

// PrepareTarget checks that a root can be made at dir (which must not
// exist or be empty, unless replace), creates its parent, and removes a
// stage left behind by an interrupted build.
func PrepareTarget(dir string, replace bool) error {
	if !filepath.IsAbs(dir) || filepath.Clean(dir) != dir || dir == "/" {
		return fmt.Errorf("%s: give an absolute, clean path other than /", dir)
	}
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("%s: %w", dir, err)
	case len(entries) > 0 && !replace:
		return field.Errorf("Replace", "%s already exists and is not empty; pass {Replace} to replace it, or choose another directory", dir)
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	return RemoveTree(StagePath(dir))
}

// OldPath is where Install keeps the root it replaced.
func OldPath(dir string) string {
	return filepath.Join(filepath.Dir(dir), "."+filepath.Base(dir)+".microbox-old")
}

// Install moves the finished stage to dir. A root already there is kept
// at OldPath(dir) until the next Install: runs started before the switch
// have it mounted and still open files in it.
func Install(stage, dir string) error {
	old := OldPath(dir)
	if err := RemoveTree(old); err != nil {
		return err
	}
	if err := os.Rename(dir, old); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("move the old root aside: %w", err)
	}
	if err := os.Rename(stage, dir); err != nil {
		os.Rename(old, dir)
		return fmt.Errorf("move the new root into place: %w", err)
	}
	return nil
}

// mountsUnder lists the mount points at or below p.
func mountsUnder(p string) []string {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		f := strings.Fields(l)
		if len(f) < 5 {
			continue
		}
		mp := unescapeMountinfo(f[4])
		if mp == p || strings.HasPrefix(mp, p+"/") {
			out = append(out, mp)
		}
	}
	return out
}

// unescapeMountinfo undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountinfo(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// RemoveTree removes a tree even where its directories are read-only
// (0555 directories are common in roots, and stop a non-root caller). It
// refuses a tree with anything mounted in it: an mmdebstrap killed while
// installing leaves the host's /proc and /sys mounted in its target, and
// removing through those mounts would reach the host.
func RemoveTree(p string) error {
	if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if mounts := mountsUnder(p); len(mounts) > 0 {
		return fmt.Errorf("%s is not removed: something is still mounted in it (%s); unmount it (umount -R %s) and retry", p, strings.Join(mounts, " "), p)
	}
	if os.Geteuid() != 0 {
		filepath.WalkDir(p, func(q string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				os.Chmod(q, 0o700)
			}
			return nil
		})
	}
	if err := os.RemoveAll(p); err != nil {
		return fmt.Errorf("remove %s: %w", p, err)
	}
	return nil
}

// Where apt on this host reads its sources; the default mirror comes from
// here because it is often the only one a host can reach.
var (
	aptSourcesList = "/etc/apt/sources.list"
	aptSourcesDir  = "/etc/apt/sources.list.d"
	osRelease      = "/etc/os-release"
)

// Debian's public archive, for hosts whose own apt mirrors are not Debian's.
const (
	debianMirror   = "http://deb.debian.org/debian"
	debianSecurity = "http://deb.debian.org/debian-security"
)

// Sources returns the apt source lines of a build. With a mirror, only that
// archive's SUITE main. Without, the host's own Debian mirrors (Debian's
// public ones on other distributions), with SUITE-updates and
// SUITE-security for a stable release, so the root gets security fixes.
func Sources(suite, mirror string) ([]string, error) {
	if mirror != "" {
		if !strings.Contains(mirror, "://") || strings.ContainsAny(mirror, " \t\n") {
			return nil, field.Errorf("Mirror", "{Mirror} %q: give a URL such as %s", mirror, debianMirror)
		}
		return []string{fmt.Sprintf("deb %s %s main", mirror, suite)}, nil
	}
	main, security := hostMirrors()
	lines := []string{fmt.Sprintf("deb %s %s main", main, suite)}
	switch suite {
	case "sid", "unstable", "experimental", "testing", "rc-buggy":
		return lines, nil
	}
	return append(lines,
		fmt.Sprintf("deb %s %s-updates main", main, suite),
		fmt.Sprintf("deb %s %s-security main", security, suite)), nil
}

// hostMirrors returns the archive and security URIs apt uses on a Debian
// host, or Debian's public ones.
func hostMirrors() (main, security string) {
	main, security = debianMirror, debianSecurity
	if !hostIsDebian() {
		return main, security
	}
	var foundMain, foundSecurity bool
	for _, s := range hostAptSources() {
		for _, suite := range s.suites {
			switch {
			case strings.HasSuffix(suite, "-security") || strings.HasSuffix(suite, "/updates"):
				if !foundSecurity {
					security, foundSecurity = s.uri, true
				}
			case !foundMain:
				main, foundMain = s.uri, true
			}
		}
	}
	return main, security
}

func hostIsDebian() bool {
	data, err := os.ReadFile(osRelease)
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "ID="); ok {
			return strings.Trim(v, `"'`) == "debian"
		}
	}
	return false
}

type aptSource struct {
	uri    string
	suites []string
}

// hostAptSources reads the enabled binary ("deb") sources of the host, in
// both formats: one-line (.list) and deb822 (.sources).
func hostAptSources() []aptSource {
	var out []aptSource
	if data, err := os.ReadFile(aptSourcesList); err == nil {
		out = append(out, parseOneLine(string(data))...)
	}
	entries, _ := os.ReadDir(aptSourcesDir)
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(aptSourcesDir, e.Name()))
		if err != nil {
			continue
		}
		switch {
		case strings.HasSuffix(e.Name(), ".list"):
			out = append(out, parseOneLine(string(data))...)
		case strings.HasSuffix(e.Name(), ".sources"):
			out = append(out, parseDeb822(string(data))...)
		}
	}
	return out
}

// parseOneLine reads "deb [options] URI SUITE COMPONENT..." lines.
func parseOneLine(text string) []aptSource {
	var out []aptSource
	for _, l := range strings.Split(text, "\n") {
		l, _, _ = strings.Cut(l, "#")
		f := strings.Fields(l)
		if len(f) < 3 || f[0] != "deb" {
			continue
		}
		f = f[1:]
		if strings.HasPrefix(f[0], "[") { // options, possibly several words
			for len(f) > 0 && !strings.HasSuffix(f[0], "]") {
				f = f[1:]
			}
			if len(f) > 0 {
				f = f[1:]
			}
		}
		if len(f) >= 2 {
			out = append(out, aptSource{uri: strings.TrimSuffix(f[0], "/"), suites: []string{f[1]}})
		}
	}
	return out
}

// parseDeb822 reads deb822 stanzas (Types, URIs, Suites, Enabled).
func parseDeb822(text string) []aptSource {
	var out []aptSource
	for _, stanza := range strings.Split(strings.ReplaceAll(text, "\r", ""), "\n\n") {
		fields := map[string]string{}
		var last string
		for _, l := range strings.Split(stanza, "\n") {
			switch {
			case strings.HasPrefix(l, "#") || strings.TrimSpace(l) == "":
			case l[0] == ' ' || l[0] == '\t':
				if last != "" {
					fields[last] += " " + strings.TrimSpace(l)
				}
			default:
				k, v, ok := strings.Cut(l, ":")
				if ok {
					last = strings.ToLower(strings.TrimSpace(k))
					fields[last] = strings.TrimSpace(v)
				}
			}
		}
		if !slices.Contains(strings.Fields(fields["types"]), "deb") || strings.EqualFold(fields["enabled"], "no") {
			continue
		}
		for _, uri := range strings.Fields(fields["uris"]) {
			out = append(out, aptSource{uri: strings.TrimSuffix(uri, "/"), suites: strings.Fields(fields["suites"])})
		}
	}
	return out
}
