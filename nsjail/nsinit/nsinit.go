// Package nsinit is the child side of a jail, in C: the spawner, each
// jail's PID 1 and the plan it carries out, and a zygote's run's PID 1.
// It runs as an ELF constructor, before the Go runtime, whenever this
// binary is started as one of them (INIT_ENV, spawner.h); every other start
// of the binary returns from it at once. README.md says which file does
// what, and in which order a jail's steps run.
//
// Its Go API is ZygoteSpawn and Image (the init image, image.go). Package
// nsjail imports it for its C, and declares the Go side of each protocol
// the headers declare (plan.h, status.h, spawner.h, zygote.h), which
// nsjail's initc_test.go holds equal.
package nsinit

/*
#cgo CFLAGS: -O2 -Wall -Wextra -Wno-unused-parameter
#include <stddef.h>
#include "zygote.h"

// The linker's bounds of zspawn.c's section, and its entry.
extern const char __start_mbx_zspawn[], __stop_mbx_zspawn[];
long zspawn(struct zspawn *);

static const char *zspawn_code(void) { return __start_mbx_zspawn; }
static size_t zspawn_len(void) { return __stop_mbx_zspawn - __start_mbx_zspawn; }
static size_t zspawn_entry(void) { return (size_t)((const char *)zspawn - __start_mbx_zspawn); }
static size_t zspawn_size(void) { return sizeof(struct zspawn); }
static size_t zspawn_resume(void) { return offsetof(struct zspawn, resume); }
*/
import "C"

import "unsafe"

// Spawn is zspawn.c's code as a zygote's template runs it.
type Spawn struct {
	Code   []byte // its section's bytes, position-independent
	Entry  int    // where zspawn is in them
	Size   int    // sizeof(struct zspawn), which zygote.py lays out alike
	Resume int    // and the offset of its last field, resume
}

// ZygoteSpawn is zspawn.c's code, which zygote.py copies into its memory.
func ZygoteSpawn() Spawn {
	return Spawn{
		Code:   C.GoBytes(unsafe.Pointer(C.zspawn_code()), C.int(C.zspawn_len())),
		Entry:  int(C.zspawn_entry()),
		Size:   int(C.zspawn_size()),
		Resume: int(C.zspawn_resume()),
	}
}

// Image is the init image (image.go): this package's C as a static musl
// executable, for a forked run's PID 1 to exec; nil in a build without it.
func Image() []byte { return image }
