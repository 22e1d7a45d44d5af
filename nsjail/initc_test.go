package nsjail

import (
	"testing"

	"github.com/microbox/microbox/internal/csource"
	"github.com/microbox/microbox/result"
)

// init.c runs before Go and shares no header with it: the constants both
// sides write down must stay equal, or jails fail at run time (a plan read
// from the wrong descriptor, a bind made writable).
func TestInitCConstants(t *testing.T) {
	c, err := csource.Read("init.c")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int64{
		"PLAN_FD":            planFD,
		"STATUS_FD":          statusFD,
		"SYNC_FD":            syncFD,
		"SPAWN_FDS":          spawnFDs,
		"SPAWNER_FD":         3, // the first of exec.Cmd's ExtraFiles (spawner.go)
		"BIND_READONLY":      bindReadOnly,
		"BIND_OPTIONAL":      bindOptional,
		"EXIT_SANDBOX_ERROR": result.ExitSandboxError,
	} {
		if got, err := c.Int(name); err != nil || got != want {
			t.Errorf("init.c's %s is %d (%v), Go's %d", name, got, err, want)
		}
	}
	if got, err := c.String("INIT_ENV"); err != nil || got != initEnv {
		t.Errorf("init.c's INIT_ENV is %q (%v), Go's initEnv %q", got, err, initEnv)
	}
}
