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

// initImage is the image in a sealed memfd, made once a process it works:
// a failure is tried again at the next template's start.
var initImage struct {
	sync.Mutex
	file *os.File
}

// zygoteInit opens what a template's children exec as their PID 1; the
// caller closes it. notImage says why that is microbox's own binary when
// the build has an image (nil otherwise).
func zygoteInit() (f *os.File, notImage error, err error) {
	initImage.Lock()
	defer initImage.Unlock()
	if initImage.file == nil && nsinit.Image() != nil {
		initImage.file, notImage = imageFile(nsinit.Image())
	}
	if initImage.file == nil {
		f, err = os.Open("/proc/self/exe")
		return f, notImage, err
	}
	fd, err := unix.FcntlInt(initImage.file.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("duplicate the init image's descriptor: %w", err)
	}
	return os.NewFile(uintptr(fd), "microbox-init"), nil, nil
}

// imageFile writes img into a memfd and seals it, so that no one holding
// the descriptor, a template included, can change it: its bytes (the
// seals), nor its mode or attributes (0555, owned by this process's uid,
// which a template's user namespace does not map). Then it checks that
// this host execs it: a kernel whose vm.memfd_noexec forbids executable
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
	if err := f.Chmod(0o555); err != nil {
		f.Close()
		return nil, fmt.Errorf("make the init image read-only: %w", err)
	}
	seals := unix.F_SEAL_SEAL | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE
	_, err = unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, seals|unix.F_SEAL_EXEC)
	if err == unix.EINVAL { // F_SEAL_EXEC (its mode kept): Linux 6.3
		_, err = unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, seals)
	}
	if err != nil {
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
