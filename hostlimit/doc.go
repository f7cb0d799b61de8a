// Package hostlimit is the per-host gate every request passes: robots.txt fetches and redirect
// hops included. For each host key it holds one token bucket (pacing), one resizable
// concurrency window, a pause-until time (Retry-After) and one aimd.Controller that learns the
// rate and window from the outcomes of finished requests.
//
// There are only a few types: Registry (all hosts), Ticket (one admitted request), Config and
// StateStore (how learned state is persisted); and, for Go programs that are not this crawler,
// NewTransport with its TransportOptions, RetryPolicy and Event.
//
// # Two ways in, one gate
//
// The crawl loop's single dispatcher goroutine asks hosts without blocking:
//
//	t, readyAt := reg.TryAdmit(now, host)
//	// t == nil: ask again at readyAt; readyAt.IsZero() means "after a Ticket of host is Done"
//
// Workers that must make a request outside the dispatcher (a redirect hop, robots.txt) block in
// Registry.Wait. Both take the same per-host lock and the same token and window accounting, so
// every limit holds for every request to the host (there is no queue: whoever asks first when a
// token is there gets it). Every admitted request is a Ticket that holds
// one window slot until Ticket.Done feeds its outcome to the controller.
//
// # Tokens: never hand out a reservation that can go stale
//
// The bucket is a golang.org/x/time/rate.Limiter with burst 1, so pacing stays smooth after a
// pause or an idle spell (no burst of saved-up tokens). Its limit follows the controller: after
// every outcome the effective rate (controller rate, capped by the Crawl-delay ceiling) is set
// with SetLimitAt.
//
// The trap: SetLimit does not re-time reservations already handed out, and a pause cannot
// cancel them, so a Reserve/Wait made at 10 req/s would still fire on schedule after a 429
// dropped the rate to 1 req/s or paused the host. This package therefore never reserves:
// it takes a token only at the moment it admits (AllowN(now, 1), which either takes one token or
// changes nothing) and otherwise computes readyAt from the token deficit
// (TokensAt) and the current rate. Nothing is promised ahead of time, so a rate change or a pause
// takes effect for the very next request.
//
// A burst-1 bucket loses whatever lateness the caller adds: asked at readyAt + δ, it is empty at
// that moment, and the next token comes 1/rate later. Go's timers wake up to a millisecond
// late on Linux, and a host allowed 49.4 req/s was sent 47.6. So a request admitted late takes
// its token as of when it could first have been admitted (token whole, pause over, the last
// Done), by up to 1 ms or 2.5% of the sending interval, whichever is less: the gaps then
// average 1/rate, and none is shorter than 1/rate by more than that credit, which is within
// the margin aimd keeps under a one-token server's limit (host.go, maxLateCredit).
//
// The server sees when a request arrives, not when it was admitted. One that leaves late (a
// busy machine, a dial or a TLS handshake before it) would leave the next one, sent on time, a
// gap shorter than the interval. The caller tells the ticket when its request was written
// (Ticket.Wrote, from httptrace's WroteRequest), and the bucket admits nothing until an
// interval after that write, less the same late credit.
//
// Nor does it see when the server handled a request: a handler that runs late (a busy server,
// a queue) leaves the next request, sent on time, a shorter gap at the server's limiter. So once
// a host has said "slow down" (its limit binds), the bucket also admits nothing until an
// interval after the latest success's write plus its excess latency (its latency less the host's
// base, the second least of its latest 16 success latencies), less the late credit: the next
// send is no earlier than answer + interval − base. A host whose latency is steady pays nothing;
// the excess counted is at most one interval, so a jittery or hostile host at most halves its
// rate. A host that never refused is spaced from writes only.
//
// # Window: a counter, not a semaphore
//
// The window (requests in flight) is a plain counter compared against the controller's Window(),
// capped by Config.AIMD.MaxWindow. It is written by hand because the window changes size at run
// time and golang.org/x/sync/semaphore cannot be resized. A window that shrinks below the
// requests already in flight admits nothing until enough of them are Done.
//
// # Pause
//
// A response that says when to come back (Retry-After, or a spent rate-limit quota) pauses the
// whole host: its Ticket's outcome carries the pause (aimd.Outcome.Pause), and Done applies it
// in the same locked step that frees the ticket's window slot, so no request slips in between.
// While now < pausedUntil nothing is admitted, and a pause is never shortened by a later,
// shorter one. Wait returns a *PausedError at once when the pause reaches more than
// Config.MaxPause past now.
//
// # Isolation
//
// Hosts are created lazily on first use. Each host has its own mutex; the registry's map is
// guarded by its own RWMutex held only to look up or insert a host, never while a host's state
// is used. One host's pauses, overloads or slow requests never slow another host.
//
// # Persistence and eviction
//
// Each host's learned state (aimd.State, paused-until, Crawl-delay ceiling, saved-at) is encoded
// as JSON and written through a StateStore (storage.DB implements it) by Flush and by Evict,
// which also drops hosts that have been idle for Config.IdleEvict with nothing in flight. A
// host created later is restored from the store, so a resumed crawl still honours a running
// backoff, for MaxRestoredPause after its save at most; an invalid ceiling restores as none.
// With a nil store, states are kept in memory so eviction still loses nothing. A HintStore
// adds hints (another crawl's states) for hosts the store has none of: a hint gives a starting
// rate and window only (aimd.Hint), and a host holding only a hint is not saved.
//
// # Host keys
//
// The registry treats keys as opaque strings and resolves nothing; the caller chooses them.
// The crawler passes urlnorm.HostKey (host[:port]), or, with --key-by-ip, the address the name
// resolves to, so that virtual hosts sharing one server share one gate.
//
// # Any Go program: NewTransport
//
// NewTransport wraps an http.RoundTripper (a scraper's, an API client's, a link checker's) in
// a Registry of its own, so that any http.Client gets the crawler's politeness: RoundTrip
// blocks in Registry.Wait for the request's host (honouring the request's context), sends the
// request, and ends its Ticket with the outcome the crawler would feed (retry.ClassifyStatus;
// the latency from the request's write to its headers; the pause its Retry-After or spent
// quota puts on the host and the limit its rate-limit headers state, read on the host's clock
// by retry.HostClock, as the crawler reads them). A served response holds its window slot until its body is read or closed. A refused
// GET or HEAD without a body is sent again after max(Retry-After, full jitter), within
// RetryPolicy.MaxAttempts. The transport starts no goroutine: every couple of minutes a
// finishing request saves the learned state and evicts idle hosts; CloseIdleConnections
// saves too. colly users pass it to Collector.WithTransport.
//
// # Concurrency
//
// Registry and Ticket are safe for concurrent use by multiple goroutines. Times passed in by
// concurrent callers may be slightly out of order; each host clamps them to the latest time it
// has seen, so the token bucket never runs backwards.
package hostlimit
