package retry

import "time"

// Windows decides how long a host whose quota is spent is left alone: until the reset it
// names, or sooner when the host's quota is a fixed window that ends before it.
//
// Resets are named in whole seconds, rounded up, so the quota returns up to a second before
// the named reset. Waiting for it is safe, but it costs each window that rounding, and most
// fixed windows start at the client's first request (express-rate-limit's store, the Redis
// INCR-then-EXPIRE pattern, most gateways), which a wait for a reset named as a whole-second
// time makes worst: the next window starts just past a whole second, so its reset is rounded
// up by almost a whole second. Behind express-rate-limit's default headers (X-RateLimit-*, the
// reset a Unix time) each window cost a second more than its length: 10 requests per 1-s
// window were crawled at 5 per second.
//
// A window's first request is the one its quota counts first (remaining = limit − 1), or,
// without a limit, the earliest-sent one answered with the window's reset time. If the window
// started there and lasts W, it ends W after that request was sent, give or take the jitter of
// the two trips. W is the window the host's policy names (RateLimit-Policy's w), or, for a
// reset named as a whole-second time, the named reset less the first answer's Date (the start
// rounded down) less one second, as a whole-second window rounded up gives. That end must
// agree with the named reset (within the second it was rounded by), and a window aligned to
// the host's clock ends no later than it either, since it began before its first request.
// Windows tries it once per host all the same: a resume that early is on trial until the named
// reset; a refusal of a request sent in that time refutes it for good, and a fresh window
// confirms it.
//
// The zero value is ready to use. A Windows is not safe for concurrent use.
type Windows struct {
	start   time.Time // the send (our clock) of the current window's first request; zero: none
	date    time.Time // the Date of the answer to it; zero if it had none
	reset   time.Time // the reset time that answer named (ResetAt); zero if it named a delay
	trial   time.Time // an early resume is on trial for requests sent in [trial, until)
	until   time.Time
	verdict int8 // 0: untried; 1: windows end as computed; -1: they do not
}

const (
	// windowMargin: an early resume comes this long after the window's computed end, for the
	// jitter between the two requests' trips to the host.
	windowMargin = 50 * time.Millisecond
	// minWindowGain: an early resume is worth a trial only if it saves at least this much.
	minWindowGain = 100 * time.Millisecond
)

// Observe records the answer to a request sent at sent (our clock): its Date (as
// ServerClock.Observe returns it: zero if it had none), its quota q (ok false if it had none)
// and whether it was refused (429, 503 and their kin).
func (w *Windows) Observe(sent, date time.Time, q Quota, ok, refused bool) {
	opens := ok && w.opens(sent, q)
	if !w.trial.IsZero() && !sent.Before(w.trial) && sent.Before(w.until) {
		switch {
		case refused:
			w.verdict = -1
		case opens:
			w.verdict = 1
		}
		if w.verdict != 0 {
			w.trial, w.until = time.Time{}, time.Time{}
		}
	}
	if opens {
		w.start, w.reset, w.date = sent, q.ResetAt, date
	}
}

// opens reports whether the request sent at sent, answered with q, is the first of a window
// newer than the one w holds (or, for a window known by its reset time alone, was sent before
// the first one seen).
func (w *Windows) opens(sent time.Time, q Quota) bool {
	switch {
	case q.Limit > 1:
		return q.Remaining == q.Limit-1 && sent.After(w.start)
	case q.ResetAt.IsZero():
		return false
	case q.ResetAt.After(w.reset):
		return true
	}
	return q.ResetAt.Equal(w.reset) && sent.Before(w.start)
}

// Resume returns how long to leave the host alone after a response at now (our clock) said
// its quota q is spent (Observe it first): q.Reset, or less if the window, started at its
// first request, ends sooner (see Windows).
func (w *Windows) Resume(now time.Time, q Quota) time.Duration {
	pause := q.Reset
	if w.verdict < 0 || w.start.IsZero() {
		return pause
	}
	var length time.Duration
	switch {
	case q.Window > 0:
		// The end must agree with the named reset, which rounds the true one up by under a
		// second: else the window did not start at that request, or is not the one q speaks of.
		end, named := w.start.Add(q.Window), now.Add(pause)
		if end.After(named.Add(windowMargin)) || end.Before(named.Add(-time.Second-windowMargin)) {
			return pause
		}
		length = q.Window
	case !w.date.IsZero() && !q.ResetAt.IsZero() && q.ResetAt.Nanosecond() == 0 && q.ResetAt.Equal(w.reset):
		length = q.ResetAt.Sub(w.date) - time.Second // agrees with the named reset by construction
	}
	if length <= 0 {
		return pause
	}
	end := w.start.Add(length)
	early := max(end.Add(windowMargin).Sub(now), 0)
	if early > pause-minWindowGain {
		return pause
	}
	if w.verdict == 0 {
		w.trial, w.until = now.Add(early), now.Add(pause)
	}
	return early
}
