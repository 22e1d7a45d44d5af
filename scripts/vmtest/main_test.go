package main

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The host trusts the guest's console only when its closing line agrees
// with its PASS/FAIL lines.
func TestConsoleVerdict(t *testing.T) {
	cases := []struct {
		console string
		ok      bool
	}{
		{"PASS a (1s)\nFAIL b: x\n1 passed, 1 failed\n", true}, // counts agree; failures are judged by run
		{"PASS a (1s)\r\nPASS b\r\n2 passed, 0 failed\r\n", true},
		{"PASS a\nkernel panic\n", false},       // no closing line: crashed
		{"PASS a\n2 passed, 0 failed\n", false}, // disagrees
		{"0 passed, 0 failed\n", false},         // ran nothing
		{"[ 1.0] noise\nPASS a\n1 passed, 0 failed\n", true},
	}
	for _, c := range cases {
		var echo bytes.Buffer
		s := scanConsole(strings.NewReader(c.console), &echo, time.Now(), func() {})
		_, _, err := s.verdict()
		if (err == nil) != c.ok {
			t.Errorf("%q: verdict error %v, want ok=%v", c.console, err, c.ok)
		}
		if strings.Contains(echo.String(), "\r") {
			t.Errorf("%q: carriage returns echoed", c.console)
		}
	}
}

// The archive is gzipped newc cpio with parents before children and the
// trailer last, as the kernel's unpacker needs.
func TestCpioLayout(t *testing.T) {
	tr := tree{}
	tr.addData("/usr/bin/x", []byte("hello"), 0o755)
	tr.add("/lib", &entry{mode: syscall.S_IFLNK | 0o777, target: "usr/lib"})
	tr.add("/dev/console", &entry{mode: syscall.S_IFCHR | 0o600, rdev: [2]uint32{5, 1}})
	var buf bytes.Buffer
	if err := tr.writeCpio(&buf); err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(zr)
	var names []string
	for len(raw) > 0 {
		if string(raw[:6]) != "070701" {
			t.Fatalf("bad magic %q", raw[:6])
		}
		field := func(i int) int {
			v, _ := strconv.ParseUint(string(raw[6+8*i:14+8*i]), 16, 32)
			return int(v)
		}
		size, nameLen := field(6), field(11)
		name := string(raw[110 : 110+nameLen-1])
		names = append(names, name)
		off := align4(110 + nameLen)
		if name == "usr/bin/x" && string(raw[off:off+size]) != "hello" {
			t.Errorf("content %q", raw[off:off+size])
		}
		if name == "dev/console" && (field(9) != 5 || field(10) != 1) {
			t.Errorf("console rdev %d:%d", field(9), field(10))
		}
		raw = raw[align4(off+size):]
	}
	want := "dev dev/console lib usr usr/bin usr/bin/x TRAILER!!!"
	if got := strings.Join(names, " "); got != want {
		t.Fatalf("entries %q, want %q", got, want)
	}
}

func align4(n int) int { return (n + 3) &^ 3 }

// fakeQemu writes a stand-in for qemu that runs script, and returns its
// path.
func fakeQemu(t *testing.T, script string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "qemu")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+script+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// fakeKVM is a file that opens read-write, as /dev/kvm does on hosts
// where it cannot run a guest.
func fakeKVM(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kvm")
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// The accelerator is what works: KVM only when its device opens and a
// probe boot under it prints the kernel's banner in time.
func TestChooseAccel(t *testing.T) {
	cases := []struct {
		name, kvm, qemu, want, why string
	}{
		{"no device", filepath.Join(t.TempDir(), "absent"), "exit 1", "tcg", "cannot be opened"},
		{"guest hangs", fakeKVM(t), "exec sleep 30", "tcg", "no kernel banner within"},
		{"qemu refuses kvm", fakeKVM(t), "echo 'failed to initialize kvm' >&2; exit 1", "tcg", "failed to initialize kvm"},
		{"guest boots", fakeKVM(t), "echo 'Linux version 6.1.0-56-amd64'; exec sleep 30", "kvm", "printed the kernel's banner"},
	}
	for _, c := range cases {
		o := options{accel: "auto", kvmDevice: c.kvm, qemu: fakeQemu(t, c.qemu), probeTimeout: 2 * time.Second, memMB: 64, cpus: 1}
		start := time.Now()
		got, why := chooseAccel(o, "vmlinuz")
		if got != c.want || !strings.Contains(why, c.why) {
			t.Errorf("%s: chose %s (%s), want %s (%q)", c.name, got, why, c.want, c.why)
		}
		if took := time.Since(start); took > 10*time.Second {
			t.Errorf("%s: the choice took %s: the probe was not ended", c.name, took)
		}
	}
	o := options{accel: "tcg", kvmDevice: fakeKVM(t), qemu: fakeQemu(t, "exit 1")}
	if got, _ := chooseAccel(o, "vmlinuz"); got != "tcg" {
		t.Errorf("-accel tcg chose %s", got)
	}
}

// A guest that goes silent fails at -idle, with its console log kept.
func TestBootHungGuest(t *testing.T) {
	o := options{qemu: fakeQemu(t, "echo 'booting'; exec sleep 60"), timeout: time.Minute, idle: time.Second, memMB: 64, cpus: 1}
	log := filepath.Join(t.TempDir(), "console.log")
	start := time.Now()
	_, _, err := boot(o, "tcg", "vmlinuz", "initrd", log)
	if err == nil || !strings.Contains(err.Error(), "silent") || !strings.Contains(err.Error(), log) {
		t.Fatalf("boot error %v, want a silent-console error naming %s", err, log)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("a hung guest took %s to fail", took)
	}
	if data, _ := os.ReadFile(log); !strings.Contains(string(data), "booting") {
		t.Errorf("console log %q lacks what the guest printed", data)
	}
}
