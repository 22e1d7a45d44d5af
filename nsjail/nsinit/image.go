//go:build microbox_init_image

package nsinit

import _ "embed"

// image is this package's C linked on its own, statically, against musl
// (musl/main.c; the Makefile builds musl/init before the binaries, with
// the microbox_init_image tag): what a forked run's PID 1 execs. A plain
// `go build` has none (image_none.go), and PID 1 execs microbox's own
// binary, the same code, as before.
//
//go:embed musl/init
var image []byte
