package batch

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/microbox/microbox/internal/policy"
	"github.com/microbox/microbox/nsjail"
	"github.com/microbox/microbox/result"
)

// Whether a zygote can run a spec is decided after the policy layers have
// shaped it (the module policy's files are read when the interpreter
// starts, which a fork's did before them), and the layers are asked for
// only once the Spec is built, so a bad option is reported before them.
func TestAssembleChecksZygoteAfterLayers(t *testing.T) {
	base := testBase(t)
	base.ZygoteFallback = true
	code := "print(1)"
	base.Code = &code
	r, err := Assemble(context.Background(), base, func() (policy.Options, error) {
		return policy.Options{DenyModules: []string{"socket"}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if z := r.Spec.Zygote; z == nil || !strings.Contains(z.Cold, "policy layers' files") {
		t.Fatalf("zygote %+v: want a cold start for the layers' files", z)
	}

	base.Timeout = 0
	_, err = Assemble(context.Background(), base, func() (policy.Options, error) {
		t.Error("layers asked for options that cannot build a Spec")
		return policy.Options{}, nil
	})
	if err == nil || !strings.Contains(err.Error(), "Timeout") {
		t.Fatalf("error %v: want the Timeout's", err)
	}
}

// Execute runs the program on its host: the stale groups of the run's
// cgroup parent collected beside it, and the verdict the caller gets
// told to the host.
func TestExecuteOnHost(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for the run's cgroup (CI runs as root)")
	}
	base := testBase(t)
	code := "print(1)"
	base.Code = &code
	r, err := Assemble(context.Background(), base, func() (policy.Options, error) { return policy.Options{}, nil })
	if err != nil {
		t.Fatal(err)
	}
	var collected []string
	var told *result.Result
	res := r.Execute(context.Background(), Host{
		Run:                nsjail.Run,
		CollectStaleGroups: func(parent string) { collected = append(collected, parent) },
		Verdict:            func(v *result.Result) { told = v },
	})
	if res.Status != result.StatusOK || res.Stdout != "1\n" {
		t.Fatalf("result %s", res.Describe())
	}
	if len(collected) != 1 || collected[0] != r.Spec.Cgroup.Parent {
		t.Errorf("collected %q, want the run's parent %q once", collected, r.Spec.Cgroup.Parent)
	}
	if told != res.Result {
		t.Errorf("verdict told %v, want the result's", told)
	}
}
