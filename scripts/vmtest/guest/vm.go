package main

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// setUpVM turns the bare initramfs into a machine microbox can run on:
// a root it can pivot away from, /proc, /sys, /dev, /tmp and cgroup2 at
// /sys/fs/cgroup with every controller handed to child groups.
func setUpVM() error {
	if err := switchRoot(); err != nil {
		return fmt.Errorf("switch root: %w", err)
	}
	mounts := []struct{ src, dst, fstype, data string }{
		{"proc", "/proc", "proc", ""},
		{"sysfs", "/sys", "sysfs", ""},
		{"devtmpfs", "/dev", "devtmpfs", ""},
		{"tmpfs", "/tmp", "tmpfs", "mode=1777"},
		{"cgroup2", "/sys/fs/cgroup", "cgroup2", "nsdelegate"},
	}
	for _, m := range mounts {
		if err := os.MkdirAll(m.dst, 0o755); err != nil {
			return err
		}
		if err := unix.Mount(m.src, m.dst, m.fstype, unix.MS_NOSUID, m.data); err != nil {
			return fmt.Errorf("mount %s on %s: %w", m.fstype, m.dst, err)
		}
	}
	// Kernel messages (the OOM killer's above all) must not tear the
	// result lines on the shared serial console.
	os.WriteFile("/proc/sys/kernel/printk", []byte("1"), 0)
	unix.Sethostname([]byte("vmtest"))
	return enableAllControllers("/")
}

// switchRoot copies the initramfs into a tmpfs and makes that the root, as
// switch_root does. The kernel's initial rootfs has no parent mount, so
// pivot_root(2) — which every jail does — refuses to leave it.
func switchRoot() error {
	const newRoot = "/newroot"
	if err := os.Mkdir(newRoot, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", newRoot, "tmpfs", 0, "mode=0755"); err != nil {
		return err
	}
	if err := copyTree("/", newRoot); err != nil {
		return err
	}
	if err := os.Chdir(newRoot); err != nil {
		return err
	}
	if err := unix.Mount(".", "/", "", unix.MS_MOVE, ""); err != nil {
		return fmt.Errorf("move %s to /: %w", newRoot, err)
	}
	if err := unix.Chroot("."); err != nil {
		return err
	}
	return os.Chdir("/")
}

// copyTree copies files, directories and symlinks from src to dst (device
// nodes are skipped: devtmpfs provides them), keeping modes and mtimes.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dst {
			return filepath.SkipDir
		}
		target := filepath.Join(dst, strings.TrimPrefix(p, src))
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			if p != src {
				if err := os.Mkdir(target, info.Mode().Perm()); err != nil {
					return err
				}
			}
			return os.Chmod(target, info.Mode()&(fs.ModePerm|fs.ModeSticky))
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case d.Type().IsRegular():
			if err := copyFile(p, target, info.Mode().Perm()); err != nil {
				return err
			}
			return os.Chtimes(target, info.ModTime(), info.ModTime())
		}
		return nil
	})
}

func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// enableAllControllers hands every controller group has to its children.
func enableAllControllers(group string) error {
	dir := filepath.Join(cgroupRoot, group)
	have, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return err
	}
	var plus []string
	for _, c := range strings.Fields(string(have)) {
		plus = append(plus, "+"+c)
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte(strings.Join(plus, " ")), 0); err != nil {
		return fmt.Errorf("enable controllers %v in %s: %w", plus, group, err)
	}
	return nil
}

// contain execs argv the way a container runtime with a private cgroup
// namespace (Docker's default on v2) leaves its payload: in a cgroup
// namespace rooted at its own, non-root group, with cgroup2 mounted
// afresh so that group looks like the root of the hierarchy.
func contain(argv []string) error {
	runtime.LockOSThread() // namespaces of this thread are what execve keeps
	if err := unix.Unshare(unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP); err != nil {
		return fmt.Errorf("unshare: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	if err := unix.Unmount(cgroupRoot, unix.MNT_DETACH); err != nil {
		return fmt.Errorf("unmount %s: %w", cgroupRoot, err)
	}
	if err := unix.Mount("cgroup2", cgroupRoot, "cgroup2", unix.MS_NOSUID, ""); err != nil {
		return fmt.Errorf("mount cgroup2: %w", err)
	}
	return unix.Exec(argv[0], argv, os.Environ())
}

// powerOff ends the VM; qemu (-no-reboot) exits with it.
func powerOff() {
	unix.Sync()
	unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
	// Should power-off fail, PID 1 exiting panics the kernel, and
	// panic=-1 with -no-reboot ends qemu all the same.
	os.Exit(1)
}
