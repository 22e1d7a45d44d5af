package seccomp

import _ "embed"

// embeddedDefault is Default() compiled by libseccomp (the compiler of
// record) for x86_64, a stack of three programs (see Programs), so that a
// run does not pay for compiling it (some milliseconds of CPU). TestEmbeddedDefault fails when it no longer matches
// Default().Compile(); `go test ./seccomp -run TestEmbeddedDefault -update`
// rewrites it.
//
//go:embed default_amd64.bpf
var embeddedDefault []byte
