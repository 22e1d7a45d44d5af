package seccomp

import (
	"fmt"
	"os"
	"testing"
)

func TestZZDump(t *testing.T) {
	prog, err := Default().Compile()
	if err != nil {
		t.Fatal(err)
	}
	f, _ := os.Create("/tmp/scs/dump.txt")
	defer f.Close()
	for i, in := range decode(prog) {
		fmt.Fprintf(f, "%4d: %04x jt=%d jf=%d k=%#x\n", i, in.code, in.jt, in.jf, in.k)
	}
	t.Logf("%d instructions", len(prog)/8)
}
