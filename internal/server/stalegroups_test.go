package server

import "testing"

// A server collects stale run groups once a minute per parent, not with
// every run.
func TestStaleGroupsPacing(t *testing.T) {
	var g staleGroups
	if !g.due("") || g.due("") {
		t.Fatal("a server collects with every run, or never")
	}
	if !g.due("/eval.slice") {
		t.Fatal("another parent waits for the first one's minute")
	}
}
