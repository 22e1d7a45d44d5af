package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// findKernel returns a bootable kernel image: the one given, or the
// vmlinuz of the newest Debian kernel package in debDir (where scripts/deps
// downloads it), unpacked once next to the package.
func findKernel(given, debDir string) (string, error) {
	if given != "" {
		return given, nil
	}
	debs, err := filepath.Glob(filepath.Join(debDir, "linux-image-*-amd64_*.deb"))
	if err != nil || len(debs) == 0 {
		return "", fmt.Errorf("no linux-image-*-amd64 package in %s: run scripts/deps (it downloads Debian's kernel there) or pass -kernel VMLINUZ", debDir)
	}
	deb := newest(debs)
	vmlinuz := strings.TrimSuffix(deb, ".deb") + ".vmlinuz"
	if _, err := os.Stat(vmlinuz); err == nil {
		return vmlinuz, nil
	}
	return vmlinuz, extractKernel(deb, vmlinuz)
}

// newest is the most recently downloaded of files (scripts/deps fetches a
// new kernel package when Debian updates it).
func newest(files []string) string {
	sort.Slice(files, func(i, j int) bool { return modTime(files[i]).After(modTime(files[j])) })
	return files[0]
}

func modTime(p string) time.Time {
	fi, err := os.Stat(p)
	if err != nil {
		return time.Time{}
	}
	return fi.ModTime()
}

// extractKernel unpacks /boot/vmlinuz-* from a kernel .deb (the package's
// data, as dpkg-deb -x would, but only that file: the modules are not
// needed, everything the test uses is built in).
func extractKernel(deb, out string) error {
	dir, err := os.MkdirTemp(filepath.Dir(out), "extract-")
	if err != nil {
		return fmt.Errorf("unpack kernel: %w", err)
	}
	defer os.RemoveAll(dir)
	sh := exec.Command("sh", "-c", `dpkg-deb --fsys-tarfile "$1" | tar -x -C "$2" --wildcards './boot/vmlinuz-*'`, "sh", deb, dir)
	sh.Stderr = os.Stderr
	if err := sh.Run(); err != nil {
		return fmt.Errorf("unpack kernel from %s: %w", deb, err)
	}
	found, _ := filepath.Glob(filepath.Join(dir, "boot", "vmlinuz-*"))
	if len(found) != 1 {
		return fmt.Errorf("unpack kernel from %s: found %v", deb, found)
	}
	if err := os.Rename(found[0], out); err != nil {
		return fmt.Errorf("unpack kernel: %w", err)
	}
	return nil
}
