package main

import (
	"runtime/debug"
	"sync"
)

// version and commit are stamped at build time: the Makefile passes
// -ldflags '-X main.version=$(git describe --tags --always --dirty)
// -X main.commit=$(git rev-parse --short HEAD)'. A plain `go build` leaves
// version "dev" and takes the commit from Go's own VCS stamp, if any.
var (
	version = "dev"
	commit  = ""
)

// versionString is what `microbox --version` prints after "microbox
// version ".
func versionString() string {
	c := commit
	if c == "" {
		c = vcsCommit()
	}
	return version + " (commit " + c + ")"
}

// vcsCommit is the commit `go build` recorded (-buildvcs), shortened as
// git shortens it, with -dirty for a modified tree; "unknown" without one.
//
// Read once: a server builds its command line, and with it the version,
// for every run it serves.
var vcsCommit = sync.OnceValue(func() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	var rev, dirty string
	for _, s := range info.Settings {
		switch {
		case s.Key == "vcs.revision":
			rev = s.Value
		case s.Key == "vcs.modified" && s.Value == "true":
			dirty = "-dirty"
		}
	}
	if rev == "" {
		return "unknown"
	}
	if len(rev) > 7 {
		rev = rev[:7]
	}
	return rev + dirty
})
