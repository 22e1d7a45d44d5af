package main

// client.c is the client half of `microbox serve` (serve.go): it runs as an
// ELF constructor, before the Go runtime, whenever this binary is started
// as `microbox exec`, and hands the run to a server if one listens.

// #cgo CFLAGS: -O2 -Wall -Wextra -Wno-unused-parameter
import "C"
