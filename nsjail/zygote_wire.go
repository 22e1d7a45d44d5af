package nsjail

// The protocol of a zygote's run, between the supervisor (zygote.go), the
// template and its forks (zygote.py) and the run's PID 1 (nsinit/zygote.c):
// nsinit/zygote.h says who says what on which descriptor, and declares it
// for C, zygote.py's first lines for Python, this file for Go;
// initc_test.go holds the three equal. The JSON messages are templateConfig
// and templateReady here, childRequest and runRequest in zygote.go.
const (
	zygoteHello = "hello\n" // the run's PID 1, with its credentials
	zygoteGo    = "go\n"    // the supervisor: PID 1 is in the run's cgroup (if it joined none itself)
	zygoteReady = "ready"   // the program: sandboxed, it waits for its run
)

// templateConfig is the supervisor's first message to a template, with
// this binary's descriptor: the modules it imports first, and what each
// child applies to itself alike (zygote.py: prepare), its key's.
type templateConfig struct {
	Preload    []string   `json:"preload"`
	SandboxUID int        `json:"sandbox_uid"`
	Rlimits    [][3]int64 `json:"rlimits"`
	Seccomp    string     `json:"seccomp"` // the filters, a stack (seccomp.Programs), in hex
	// Spawn is the code that clones each child's PID 1 (nsinit/zspawn.c),
	// in hex, with its entry and the layout of its struct zspawn.
	Spawn       string `json:"spawn"`
	SpawnEntry  int    `json:"spawn_entry"`
	SpawnSize   int    `json:"spawn_size"`
	SpawnResume int    `json:"spawn_resume"`
}

// templateReady is the template's answer, once it has imported them: its
// Python's version, or why a preload failed.
type templateReady struct {
	Ready string `json:"ready"`
	Error string `json:"error"`
}
