package nsjail

// What a zygote's children exec as their PID 1 (nsinit/zygote.c): the
// init image, when the build has one (nsinit.Image) and this host lets
// microbox exec it; else microbox's own binary, the same C.

import (
	"fmt"
	"os"
	"os/exec"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/microbox/microbox/nsjail/nsinit"
)

// initImage is the image in a sealed memfd, made and tried once a process:
// file is nil when the build has no image or the host refused it (why).
var initImage struct {
	once sync.Once
	file *os.File
	why  error
}

// zygoteInit opens what a template's children exec as their PID 1; the
// caller closes it.
func zygoteInit() (*os.File, error) {
	initImage.once.Do(func() {
		if img := nsinit.Image(); img != nil {
			initImage.file, initImage.why = imageFile(img)
		}
	})
	if initImage.file == nil {
		return os.Open("/proc/self/exe")
	}
	fd, err := unix.FcntlInt(initImage.file.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("duplicate the init image's descriptor: %w", err)
	}
	return os.NewFile(uintptr(fd), "microbox-init"), nil
}

// imageFile writes img into a memfd, seals it (no one holding the
// descriptor, a template included, can change it) and checks that this
// host execs it: a kernel whose vm.memfd_noexec forbids executable
// memfds, or a security module that refuses the exec, leaves the runs on
// microbox's own binary.
func imageFile(img []byte) (*os.File, error) {
	flags := unix.MFD_CLOEXEC | unix.MFD_ALLOW_SEALING
	fd, err := unix.MemfdCreate("microbox-init", flags|unix.MFD_EXEC)
	if err == unix.EINVAL { // before Linux 6.3, every memfd is executable and MFD_EXEC unknown
		fd, err = unix.MemfdCreate("microbox-init", flags)
	}
	if err != nil {
		return nil, fmt.Errorf("memfd for the init image: %w", err)
	}
	f := os.NewFile(uintptr(fd), "microbox-init")
	if _, err := f.Write(img); err != nil {
		f.Close()
		return nil, fmt.Errorf("write the init image: %w", err)
	}
	seals := unix.F_SEAL_SEAL | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE
	if _, err := unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, seals); err != nil {
		f.Close()
		return nil, fmt.Errorf("seal the init image: %w", err)
	}
	// musl/main.c exits 0 on "probe"; fd stays open in the child until its exec.
	probe := exec.Command(fmt.Sprintf("/proc/self/fd/%d", fd), "probe")
	probe.Env = []string{}
	if out, err := probe.CombinedOutput(); err != nil {
		f.Close()
		return nil, fmt.Errorf("exec the init image: %v %s", err, out)
	}
	return f, nil
}
