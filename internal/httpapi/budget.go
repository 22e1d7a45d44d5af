package httpapi

import (
	"io"
	"net/http"
	"sync"
	"time"
)

// bodyBudget bounds the request bodies in the server's memory before
// their runs are admitted, whatever callers send or fail to send: a
// request takes its share of the budget (its Content-Length, or the
// largest body allowed when it has none) before its body is read, and
// gives it back when its run is admitted (admission bounds the runs'
// tasks from then on) or its handler returns. A request whose share is
// not free is refused at once (429), its body unread.
type bodyBudget struct {
	mu      sync.Mutex
	free    int64
	maxBody int64         // the largest share
	timeout time.Duration // for a body to arrive
}

func newBodyBudget(budget, maxBody int64, timeout time.Duration) *bodyBudget {
	return &bodyBudget{free: budget, maxBody: maxBody, timeout: timeout}
}

// limit has next's requests take their share first; it also bounds the
// time a body takes to arrive by the timeout, for handlers that read it
// themselves (the MCP SDK's), so that a share is never held without end.
func (b *bodyBudget) limit(next http.Handler) http.HandlerFunc {
	return b.limitTo(next, func(*http.Request) int64 { return b.maxBody })
}

// limitTo is limit for bodies bounded by most(r) rather than the largest
// body (a session's file, by its file cap): their share is up to that.
func (b *bodyBudget) limitTo(next http.Handler, most func(*http.Request) int64) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		n := most(r)
		if r.ContentLength >= 0 {
			n = min(r.ContentLength, n)
		}
		if !b.take(n) {
			w.Header().Set("Connection", "close") // the body is not read
			writeError(w, http.StatusTooManyRequests, "busy: request bodies already take the server's whole --http-body-budget; try again after Retry-After seconds")
			return
		}
		rc := http.NewResponseController(w)
		if r.ContentLength != 0 { // else no read would lift it
			rc.SetReadDeadline(time.Now().Add(b.timeout))
		}
		body := &budgetBody{ReadCloser: r.Body, rc: rc, left: r.ContentLength,
			give: sync.OnceFunc(func() { b.give(n) })}
		defer body.give()
		r.Body = body
		next.ServeHTTP(w, r)
	}
}

func (b *bodyBudget) take(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n > b.free {
		return false
	}
	b.free -= n
	return true
}

func (b *bodyBudget) give(n int64) {
	b.mu.Lock()
	b.free += n
	b.mu.Unlock()
}

// budgetBody is a request's body, holding its share of the budget.
type budgetBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	left int64 // bytes still to come when the length is known, else -1
	give func()
}

// Read lifts the read deadline once the whole body is in: the server's
// read that notices a caller going away must not end a run when it
// passes. After a failed read it stays, for net/http drains what is left
// of the body after the answer, which must not wait on a silent caller.
func (b *budgetBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if b.left >= 0 {
		b.left -= int64(n)
	}
	if err == io.EOF || (err == nil && b.left == 0) {
		b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// admitted gives r's share back: its run is admitted, and counted there.
func admitted(r *http.Request) {
	if b, ok := r.Body.(*budgetBody); ok {
		b.give()
	}
}
