package rootfs

import (
	"github.com/microbox/microbox/internal/lang"
)

// checkLanguages reports, for each language the root should run, whether
// its tools are there and its hello world prints hello in the sandbox
// (compiled first, for a compiled language).
func checkLanguages(r *Report, dir string, o CheckOptions) {
	for _, name := range o.Languages {
		what := "lang " + name
		l, err := lang.Lookup(name)
		if err == nil {
			err = CheckLanguage(dir, l)
		}
		if err != nil {
			r.add(Fail, what, "%v", err)
			continue
		}
		if o.RunLanguage == nil {
			r.add(OK, what, "%v are executables", LanguageTools(l))
			continue
		}
		out, err := o.RunLanguage(l.Name, l.Hello)
		switch {
		case err != nil:
			r.add(Fail, what, "hello world does not run in the sandbox: %v", err)
		case out != "hello\n":
			r.add(Fail, what, "hello world printed %.100q, not hello", out)
		default:
			r.add(OK, what, "hello world runs in the sandbox (%v)", LanguageTools(l))
		}
	}
}
