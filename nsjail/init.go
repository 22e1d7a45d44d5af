package nsjail

// nsinit holds the child side of the jail, in C: the spawner, each jail's
// PID 1 and the plan's interpreter, and a zygote's run's PID 1. It runs as
// an ELF constructor, before the Go runtime, whenever this binary is
// started as one of them (see initEnv); every other start of the binary
// returns from it at once.
//
// Each protocol between the two sides is declared once per language: in C
// by a header of nsinit's, in Go here (the spawner's request and PID 1's
// status lines), in plan.go (the plan, plan.h) and zygote_wire.go (a
// zygote's run, zygote.h). initc_test.go holds the two equal.
import _ "github.com/microbox/microbox/nsjail/nsinit"

// The spawner's request (nsinit/spawner.h).
const (
	// initEnv is the variable that turns a start of /proc/self/exe into
	// the jail spawner (Spawner), whatever its value but zygoteInit's.
	initEnv = "_MICROBOX_INIT"
	// spawnerFD is the spawner's socket: the first of exec.Cmd's
	// ExtraFiles.
	spawnerFD = 3
	// requestStrings is how many NUL-ended strings follow the clone flags.
	requestStrings = 5
	// maxRequest bounds a request's message, its strings included.
	maxRequest = 4096
	// replyErrorMax bounds the error message of the spawner's reply.
	replyErrorMax = 1024
	// maxLocks is how many locks PID 1 may hold: a zygote's template
	// holds its own uid slot and one per child.
	maxLocks = 1 + ZygoteChildren
	// maxTasks is how many cgroup v1 hierarchies PID 1 may join itself:
	// the tasks files its go carries.
	maxTasks = 8
	// goByte opens the go: PID 1's first message on its syncFD.
	goByte = 'g'
	// The request's extras: the descriptors that follow PID 1's, by kind.
	extraCgroup = 'c' // the run's cgroup v2 directory (CLONE_INTO_CGROUP)
	extraLock   = 'l' // a lock PID 1 holds for its life
)

// PID 1's descriptors past stdin, stdout and stderr, as the spawner gives
// them (spawnFDs in all) and PID 1 reads them (nsinit/plan.h, status.h,
// spawner.h).
const (
	planFD   = 3 // the plan, from the supervisor
	statusFD = 4 // status lines, to the supervisor
	syncFD   = 5 // go: PID 1 waits for a message on it (a SOCK_SEQPACKET socket)
	spawnFDs = 6
)

// The words that open PID 1's status lines (nsinit/status.h), which
// supervise.go's record reads; an "exit" line ends in result.LimitWall
// when PID 1 held the wall-clock limit itself.
const (
	statusError = "error" // the rest of the line is why set-up failed
	statusPhase = "phase" // <name> <monotonic ns>, when tracing
	statusReady = "ready" // waits for the run's part of the plan
	statusStart = "start" // <monotonic ns> of the program's start
	statusExit  = "exit"  // <wait status> <monotonic ns> <cpu µs> <max rss KiB> [wall]
)
