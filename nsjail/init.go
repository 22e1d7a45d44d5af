package nsjail

// init.c holds the child side of the jail: the spawner and each jail's
// PID 1. It runs as an ELF constructor, before the Go runtime, whenever
// this binary is started as the spawner (see initEnv); every other start
// of the binary returns from it at once.
//
// What the two sides share they each write down: the constants below,
// and the plan's "bind" flags (plan.go). initc_test.go holds them equal.

// #cgo CFLAGS: -O2 -Wall -Wextra -Wno-unused-parameter
import "C"

// initEnv is the variable that turns a start of /proc/self/exe into the
// jail spawner (Spawner). Its value is ignored.
const initEnv = "_MICROBOX_INIT"

// PID 1's descriptors past stdin, stdout and stderr, as the spawner gives
// them (spawnFDs in all) and init.c reads them.
const (
	planFD   = 3 // the plan, from the supervisor
	statusFD = 4 // status lines, to the supervisor
	syncFD   = 5 // go: PID 1 waits for a byte on it
	spawnFDs = 6
)
