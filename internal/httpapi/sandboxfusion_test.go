package httpapi

import (
	"reflect"
	"strings"
	"testing"

	"github.com/microbox/microbox/internal/batch"
	"github.com/microbox/microbox/nsjail"
)

// /run_code's request sets only the task keys declared as its mapping's
// (batch.InRunCode).
func TestRunCodeSetsDeclaredKeys(t *testing.T) {
	code, lang, stdin, secs, mb, data := "print(1)", "python", "x", laxFloat(5), laxInt(64), "eA=="
	req := &runCodeRequest{Code: &code, Language: &lang, Stdin: &stdin, RunTimeout: &secs, MemoryLimitMB: &mb,
		Files: map[string]*string{"a.txt": &data}}
	task, err := req.task(nsjail.Defaults(), batch.Limits{}, "/tmp/tmpabcdefgh")
	if err != nil {
		t.Fatal(err)
	}
	declared := map[string]bool{}
	for _, f := range batch.FieldsIn(batch.InRunCode) {
		declared[f.Key] = true
	}
	v := reflect.ValueOf(task).Elem()
	for i := range v.NumField() {
		key, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
		if !v.Field(i).IsZero() && !declared[key] {
			t.Errorf("/run_code sets %q, which the declaration does not map from it", key)
		}
	}
}
