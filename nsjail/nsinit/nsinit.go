// Package nsinit is the child side of a jail, in C: the spawner, each
// jail's PID 1 and the plan it carries out, and a zygote's run's PID 1.
// It runs as an ELF constructor, before the Go runtime, whenever this
// binary is started as one of them (INIT_ENV, spawner.h); every other start
// of the binary returns from it at once. README.md says which file does
// what, and in which order a jail's steps run.
//
// It has no Go API: package nsjail imports it for its C, and declares the
// Go side of each protocol the headers declare (plan.h, status.h,
// spawner.h, zygote.h), which nsjail's initc_test.go holds equal.
package nsinit

// #cgo CFLAGS: -O2 -Wall -Wextra -Wno-unused-parameter
import "C"
