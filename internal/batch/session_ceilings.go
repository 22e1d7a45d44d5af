package batch

// sessionCeilings bound a server's sessions (internal/session, which
// reads them with Limits.Value): how many at once, how long each may
// live, idle or at all, and the bytes of a file moved in or out. A
// session's limits (mem, cpus, ...) and its cells' code, stdin and
// timeout are bounded by the tasks' ceilings above.
var sessionCeilings = []Ceiling{
	{Name: "sessions", Kind: KindCount, Default: "16", Session: true,
		Doc: "the most sessions the server holds at once (past it, a new one is refused with 429)"},
	{Name: "session-idle-ttl", Key: "idle_ttl", Kind: KindDuration, Default: "10m", Session: true,
		Doc: "the longest a session may ask to stay idle (between requests) before it is ended; its default"},
	{Name: "session-lifetime", Key: "max_lifetime", Kind: KindDuration, Default: "1h", Session: true,
		Doc: "the longest a session may ask to live; its default"},
	{Name: "session-file-bytes", Kind: KindSize, Default: "64M", Session: true,
		Doc: "the most bytes of one file a session takes in (PUT) or gives out (GET)"},
}
