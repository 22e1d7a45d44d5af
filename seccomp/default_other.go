//go:build !amd64

package seccomp

// embeddedDefault is nil where no precompiled default filter is shipped:
// Program compiles Default() at run time instead.
var embeddedDefault []byte
