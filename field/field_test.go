package field

import (
	"errors"
	"fmt"
	"testing"
)

func flags(f string) string {
	return map[string]string{"TmpfsSize": "--tmpfs-size", "Memory": "--mem"}[f]
}

func TestSpell(t *testing.T) {
	err := Errorf("TmpfsSize", "{TmpfsSize} (%d bytes) exceeds {Memory}; 100%% {Unknown}", 64)
	if got, want := err.Error(), "TmpfsSize (64 bytes) exceeds Memory; 100% Unknown"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if got, want := err.Spell(flags), "--tmpfs-size (64 bytes) exceeds --mem; 100% Unknown"; got != want {
		t.Errorf("Spell = %q, want %q", got, want)
	}
	// Arguments are not searched for markers.
	if got := Errorf("Env", "{Env} %q: write KEY=VALUE", "{Memory}").Spell(flags); got != `Env "{Memory}": write KEY=VALUE` {
		t.Errorf("an argument was rewritten: %q", got)
	}
}

func TestMessage(t *testing.T) {
	wrapped := fmt.Errorf("cgroup: %w", Errorf("Memory", "{Memory} too small"))
	if got, want := Message(wrapped, flags), "cgroup: --mem too small"; got != want {
		t.Errorf("Message = %q, want %q", got, want)
	}
	if got := Message(errors.New("plain"), flags); got != "plain" {
		t.Errorf("Message of a plain error = %q", got)
	}
	if !Is(wrapped) || Is(errors.New("x")) {
		t.Error("Is")
	}
}

func TestNested(t *testing.T) {
	inner := Errorf("Memory", "{Memory} is 0")
	outer := Errorf("TmpfsSize", "%v (so {TmpfsSize} cannot be checked)", inner)
	if got, want := Message(fmt.Errorf("run: %w", outer), flags), "run: --mem is 0 (so --tmpfs-size cannot be checked)"; got != want {
		t.Errorf("Message = %q, want %q", got, want)
	}
	var fe *Error
	if !errors.As(outer, &fe) || !errors.Is(outer, inner) {
		t.Error("the inner error is not in the chain")
	}
}

func TestSprintf(t *testing.T) {
	if got, want := Sprintf(flags, "pass {Memory} (%d%%), not %q", 5, "{Memory}"), `pass --mem (5%), not "{Memory}"`; got != want {
		t.Errorf("Sprintf = %q, want %q", got, want)
	}
	if got := Sprintf(nil, "pass {Memory}"); got != "pass Memory" {
		t.Errorf("Sprintf without names = %q", got)
	}
}
