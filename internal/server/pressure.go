package server

import (
	"context"
	"time"

	"github.com/microbox/microbox/nsjail"
	"github.com/microbox/microbox/result"
)

// A run that could not start for want of descriptors (Result.Unavailable)
// is no verdict: the server is short of them while other runs hold
// theirs, and has more once those end. So the start is tried again, with
// a wait doubling from startRetryFirst, for up to startRetryFor; a run
// that still cannot start keeps the mark, and the front end answers
// "busy" (HTTP 503 with Retry-After, an MCP tool error) instead of a
// result.
const (
	startRetryFirst = 10 * time.Millisecond
	startRetryMax   = 250 * time.Millisecond
	startRetryFor   = 3 * time.Second
)

// runStarted runs s with run until it starts, or until startRetryFor has
// passed or ctx ended; the teardowns of the failed starts are done.
func runStarted(ctx context.Context, s *nsjail.Spec, run func(context.Context, *nsjail.Spec) (*result.Result, func() error)) (*result.Result, func() error) {
	giveUp := time.Now().Add(startRetryFor)
	for wait := startRetryFirst; ; wait = min(2*wait, startRetryMax) {
		res, teardown := run(ctx, s)
		if res.Unavailable == nil || time.Now().Add(wait).After(giveUp) {
			return res, teardown
		}
		teardown() // a start that failed: nothing of the run's to keep
		select {
		case <-ctx.Done():
			return res, func() error { return nil }
		case <-time.After(wait):
		}
	}
}
