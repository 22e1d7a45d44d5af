package batch

// The task's fields, declared once (Fields): each one's JSON key, the
// flag of exec's that sets the same field, the field of nsjail.Options or
// policy.Options it sets, its kind, exec's default, whether the operator's
// ceiling bounds it, and where it is accepted. The task's keys and names
// in messages (TaskKey, fieldNames), the override of the base by a task
// (apply), the ceilings (ceilings.go) and the MCP tool's input schema
// (internal/mcptool) are derived from it; Task's json tags are checked
// against it when the package starts.

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/microbox/microbox/internal/lang"
)

// Kind is how a field's value is written and applied.
type Kind string

const (
	KindSize     Kind = "size"     // a Quantity: "256M", or a number of bytes
	KindDuration Kind = "duration" // a Quantity: "3s", or a number of seconds
	KindCount    Kind = "count"    // a whole number
	KindFloat    Kind = "float"    // a number
	KindBool     Kind = "bool"
	KindString   Kind = "string"
	KindList     Kind = "list" // of strings
	KindMap      Kind = "map"  // of strings to strings
	KindJSON     Kind = "json" // any JSON value ("id")
)

// Where says which front ends accept a field.
type Where uint8

const (
	InLine    Where = 1 << iota // a batch or eval task line
	InAPI                       // a network task: HTTP /v1/runs, /v1/batch's lines
	InMCP                       // the MCP tool's input
	InRunCode                   // SandboxFusion's /run_code request maps onto it
)

// Field is one field of a task.
type Field struct {
	Key  string // the task's JSON key
	Flag string // exec's flag for the same field, without "--" ("": none)
	// Name is the field of nsjail.Options, or of policy.Options when
	// Layer, that the task's value replaces ("": none, e.g. "id"), as
	// package field names it in messages.
	Name  string
	Layer bool
	Kind  Kind
	// Default is exec's default (that of the base a task starts from,
	// unless the operator changed it), as its flag writes it.
	Default string
	// Ceiling: the operator's --max-KEY bounds what a task may ask for
	// (its default: the base's own value; ceilings.go).
	Ceiling bool
	// ZeroIsNone: 0 means no limit (so it is above every ceiling).
	ZeroIsNone bool
	Where      Where
	Doc        string // what it does, for a caller (the MCP schema)
	// Enum lists the values a string field takes, if only some.
	Enum []string
}

const everywhere = InLine | InAPI | InMCP

// Fields are the task's fields, in the order a task applies them (the
// working directory before the files that go there).
var Fields = []Field{
	{Key: "id", Kind: KindJSON, Where: InLine | InAPI,
		Doc: "Any JSON value, copied into the task's result."},
	{Key: "code", Name: "Code", Kind: KindString, Where: everywhere | InRunCode,
		Doc: "The Python program, run with python3 -c."},
	{Key: "code_path", Name: "CodePath", Kind: KindString, Where: everywhere | InRunCode,
		Doc: "Run code as a file at this path (relative: in the working directory), python PATH, so that __file__ and sys.argv[0] are the path, instead of python3 -c."},
	{Key: "file", Name: "File", Kind: KindString, Where: InLine,
		Doc: "A Python file on the host to run instead of code (batch only: a network caller names no host file)."},
	// The program's language and its compile step (docs/languages.md).
	{Key: "language", Flag: "lang", Name: "Language", Kind: KindString, Default: lang.Python, Where: everywhere | InRunCode, Enum: lang.Names(),
		Doc: "The program's language (default python); c and cpp are compiled first, in a sandbox of their own (the result's \"compile\")."},
	{Key: "compile_timeout", Flag: "compile-timeout", Name: "CompileTimeout", Kind: KindDuration, Default: "10s", Ceiling: true, Where: everywhere | InRunCode,
		Doc: "Wall-clock limit of the compile step (c, cpp): seconds, or a duration."},
	{Key: "compile_mem", Flag: "compile-mem", Name: "CompileMemory", Kind: KindSize, Default: "512M", Ceiling: true, Where: everywhere,
		Doc: "Memory limit of the compile step: bytes, or a size."},
	{Key: "compile_output_limit", Flag: "compile-output-limit", Name: "CompileOutputLimit", Kind: KindSize, Default: "16M", Ceiling: true, Where: everywhere,
		Doc: "Cap on each of the compile step's stdout (the binary) and stderr: bytes, or a size."},
	{Key: "stdin", Name: "Stdin", Kind: KindString, Where: everywhere | InRunCode,
		Doc: "The program's standard input (default: empty)."},
	{Key: "args", Name: "Args", Kind: KindList, Where: everywhere,
		Doc: "Arguments after the program (sys.argv[1:])."},
	{Key: "workdir", Flag: "workdir", Name: "Workdir", Kind: KindString, Default: "/tmp", Where: everywhere | InRunCode,
		Doc: "Working directory inside the sandbox (default /tmp)."},
	{Key: "files", Name: "Files", Kind: KindMap, Where: everywhere | InRunCode,
		Doc: "Text files to write before the program starts, {name: content}: a relative name goes into the working directory, an absolute one under /tmp or the working directory."},
	{Key: "files_base64", Kind: KindMap, Where: everywhere,
		Doc: "Files of any bytes to write before the program starts, {name: base64 of the content}, placed as \"files\" places them."},
	{Key: "fetch", Flag: "fetch", Name: "Fetch", Kind: KindList, Where: everywhere,
		Doc: "Files to fetch from the sandbox once the program has ended (a relative name is in the working directory, an absolute one under /tmp or the working directory): the result's \"fetched\" holds each one's base64 content, or why it could not be fetched."},
	{Key: "env", Flag: "env", Name: "Env", Kind: KindMap, Where: everywhere,
		Doc: "Variables added to the program's environment."},
	{Key: "mem", Flag: "mem", Name: "Memory", Kind: KindSize, Default: "256M", Ceiling: true, Where: everywhere | InRunCode,
		Doc: "Memory limit: bytes, or a size such as \"256M\" or \"1g\"; at most the server's own unless its operator raised the ceiling."},
	{Key: "timeout", Flag: "timeout", Name: "Timeout", Kind: KindDuration, Default: "10s", Ceiling: true, Where: everywhere | InRunCode,
		Doc: "Wall-clock limit from the program's start: seconds, or a duration such as \"500ms\" or \"5s\"; at most the server's own unless its operator raised the ceiling."},
	{Key: "cpu_time", Flag: "cpu-time", Name: "CPUTime", Kind: KindDuration, Default: "0", Ceiling: true, ZeroIsNone: true, Where: everywhere,
		Doc: "CPU-time limit of all the run's processes together: seconds, or a duration (0: none, where the server sets none)."},
	{Key: "cpus", Flag: "cpus", Name: "CPUs", Kind: KindFloat, Default: "1", Ceiling: true, Where: everywhere,
		Doc: "CPU bandwidth in cores (fractions allowed, at least 0.01)."},
	{Key: "pids", Flag: "pids", Name: "Pids", Kind: KindCount, Default: "128", Ceiling: true, Where: everywhere,
		Doc: "Limit on the run's processes and threads together."},
	{Key: "output_limit", Flag: "output-limit", Name: "OutputLimit", Kind: KindSize, Default: "1M", Ceiling: true, Where: everywhere,
		Doc: "Cap on each of stdout and stderr: bytes, or a size; exceeding it ends the run (output_limit)."},
	{Key: "output_mode", Name: "OutputMode", Kind: KindString, Default: "kill", Where: everywhere | InRunCode, Enum: []string{"kill", "truncate"},
		Doc: "What writing past output_limit does: kill ends the run (status output_limit); truncate keeps the first output_limit bytes, drops the rest (stdout_truncated, stderr_truncated) and lets the run end on its own."},
	{Key: "memory_rlimit", Name: "MemoryRlimit", Kind: KindBool, Default: "false", Where: everywhere | InRunCode,
		Doc: "Also cap each process's data segment a little under mem, so that an allocation past it fails in the program (Python raises MemoryError) instead of the run being killed; mem still bounds the run."},
	{Key: "tmpfs_size", Flag: "tmpfs-size", Name: "TmpfsSize", Kind: KindSize, Default: "64M", Ceiling: true, Where: everywhere | InRunCode,
		Doc: "Size of each scratch tmpfs (/tmp, the working directory): bytes, or a size; at most mem."},
	{Key: "deny_modules", Flag: "deny-modules", Name: "DenyModules", Layer: true, Kind: KindList, Where: everywhere,
		Doc: "Modules (and their submodules) the program may not import (a policy layer, not the boundary)."},
	{Key: "allow_modules", Flag: "allow-modules", Name: "AllowModules", Layer: true, Kind: KindList, Where: everywhere,
		Doc: "The only modules (and their submodules) the program may import; wins over deny_modules."},
	{Key: "guard", Flag: "guard", Name: "Guard", Layer: true, Kind: KindString, Where: everywhere, Enum: []string{"humaneval"},
		Doc: "humaneval: disable what human-eval's reliability_guard disables."},
	{Key: "redact", Flag: "redact", Name: "Redact", Layer: true, Kind: KindBool, Default: "false", Where: everywhere,
		Doc: "Mask secrets (API keys, private keys, credentials, e-mail addresses, private IPs, host paths) in stdout and stderr."},
	{Key: "redact_patterns", Flag: "redact-pattern", Name: "RedactPatterns", Layer: true, Kind: KindList, Where: everywhere,
		Doc: "More to mask, as NAME=REGEX; implies redact."},
	{Key: "max_risk", Flag: "max-risk", Name: "MaxRisk", Layer: true, Kind: KindCount, Where: everywhere,
		Doc: "Refuse code whose static risk score is above this (status rejected)."},
	{Key: "zygote", Flag: "zygote", Name: "Zygote", Kind: KindBool, Default: "false", Where: everywhere,
		Doc: "Fork the run from a warm interpreter the server keeps (faster start; same verdicts)."},
	{Key: "zygote_fallback", Flag: "zygote-fallback", Name: "ZygoteFallback", Kind: KindBool, Default: "false", Where: everywhere,
		Doc: "As zygote, but start cold instead of failing where no warm interpreter can take the run."},
	{Key: "preload", Flag: "preload", Name: "Preload", Kind: KindList, Where: everywhere,
		Doc: "With zygote: modules the warm interpreter imports first, e.g. [\"numpy\"]."},
}

// fieldsByName are Fields by Name, and taskFieldIndex the index of each
// key's field in Task.
var (
	fieldsByName   = map[string]*Field{}
	taskFieldIndex = map[string][]int{}
)

func init() {
	tags := map[string][]int{}
	for f := range reflect.TypeFor[Task]().Fields() {
		key, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if key != "-" {
			tags[key] = f.Index
		}
	}
	for i := range Fields {
		f := &Fields[i]
		index, ok := tags[f.Key]
		if !ok {
			panic(fmt.Sprintf("batch: field %q is declared but Task has no such key", f.Key))
		}
		delete(tags, f.Key)
		taskFieldIndex[f.Key] = index
		if f.Name != "" {
			fieldsByName[f.Name] = f
		}
	}
	if len(tags) > 0 {
		panic(fmt.Sprintf("batch: Task has keys that Fields does not declare: %v", slices.Collect(maps.Keys(tags))))
	}
}

// FieldsIn are the fields a front end accepts, in Fields' order.
func FieldsIn(w Where) []Field {
	var in []Field
	for _, f := range Fields {
		if f.Where&w != 0 {
			in = append(in, f)
		}
	}
	return in
}

// TaskKey is the task's key for a field of Options or of policy.Options,
// quoted as errors spell it; "" if a task cannot set the field.
func TaskKey(name string) string {
	if f, ok := fieldsByName[name]; ok {
		return `"` + f.Key + `"`
	}
	return ""
}

// value is the task's value of key: nil when the task leaves it alone.
func (t *Task) value(key string) reflect.Value {
	v := reflect.ValueOf(t).Elem().FieldByIndex(taskFieldIndex[key])
	if v.IsNil() {
		return reflect.Value{}
	}
	return v
}

// fieldNames spells a field of Options in the task's errors: as the
// task's key when the task set it (a program is always the task's), else
// as base spells it (the base's FieldNames: the caller's own names).
func (t *Task) fieldNames(base func(string) string) func(string) string {
	// A task that speaks of zygotes is told of all three in its keys: a
	// message about one names another ("preload" needs "zygote").
	zygote := t.value("zygote").IsValid() || t.value("zygote_fallback").IsValid() || t.value("preload").IsValid()
	return func(name string) string {
		f, ok := fieldsByName[name]
		switch {
		case !ok:
		case name == "Code" || name == "File" || t.value(f.Key).IsValid(),
			zygote && (name == "Zygote" || name == "ZygoteFallback" || name == "Preload"):
			return TaskKey(name)
		}
		if base == nil {
			return ""
		}
		return base(name)
	}
}
