package nsjail

// init.c holds the child side of the jail: the spawner and each jail's
// PID 1. It runs as an ELF constructor, before the Go runtime, whenever
// this binary is started as the spawner (see initEnv); every other start
// of the binary returns from it at once.

// #cgo CFLAGS: -O2 -Wall -Wextra -Wno-unused-parameter
import "C"

// initEnv is the variable that turns a start of /proc/self/exe into the
// jail spawner (Spawner). Its value is ignored.
const initEnv = "_MICROBOX_INIT"
