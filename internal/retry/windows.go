package retry

import (
	"net/http"
	"strings"
	"time"
)

// Windows decides how long a host whose quota is spent is left alone, when the host names the
// quota's reset as a whole-second time on its clock (X-RateLimit-Reset as a Unix time, the
// default of express-rate-limit and of many APIs).
//
// Such a reset is rounded up: the quota returns up to a second before it. Waiting for it is
// safe, but most fixed windows start at the client's first request (express-rate-limit's
// store, the Redis INCR-then-EXPIRE pattern, most gateways), so the first request after the
// wait starts the next window just past a whole second, and its reset is rounded up by almost
// a whole second: each window then costs a second more than its length (10 requests per 1-s
// window were crawled at 5 per second). If the window did start at its first request, at f on
// the host's clock, and lasts W whole seconds, the first answer's Date (f rounded down) and the
// named reset (f + W rounded up) differ by W + 1, so the window ends W after that request was
// sent, give or take the jitter of the two trips. Windows tries that once per host: a resume
// that early is on trial until the named reset; a refusal of a request sent in that time
// refutes it for good (that host's windows are aligned to its clock, or of another length),
// and a fresh window confirms it.
//
// The zero value is ready to use. A Windows is not safe for concurrent use.
type Windows struct {
	reset   time.Time // ResetAt of the newest window seen (the host's clock)
	start   time.Time // the earliest send (our clock) of a request answered with that reset
	date    time.Time // the Date of the answer to that request; zero if it had none
	trial   time.Time // an early resume is on trial for requests sent in [trial, until)
	until   time.Time
	verdict int8 // 0: untried; 1: windows start at the first request; -1: they do not
}

const (
	// windowMargin: an early resume comes this long after the window's computed end, for the
	// jitter between the two requests' trips to the host.
	windowMargin = 50 * time.Millisecond
	// minWindowGain: an early resume is worth a trial only if it saves at least this much.
	minWindowGain = 100 * time.Millisecond
)

// Observe records the answer to a request sent at sent (our clock): its Date header, its
// quota q (ok false if it had none) and whether it was refused (429, 503 and their kin).
func (w *Windows) Observe(sent time.Time, date string, q Quota, ok, refused bool) {
	if !w.trial.IsZero() && !sent.Before(w.trial) && sent.Before(w.until) {
		switch {
		case refused:
			w.verdict = -1
		case ok && w.newer(q):
			w.verdict = 1
		}
		if w.verdict != 0 {
			w.trial, w.until = time.Time{}, time.Time{}
		}
	}
	if !ok || q.ResetAt.IsZero() || !(w.newer(q) || q.ResetAt.Equal(w.reset) && sent.Before(w.start)) {
		return
	}
	w.reset, w.start, w.date = q.ResetAt, sent, time.Time{}
	if d, err := http.ParseTime(strings.TrimSpace(date)); err == nil {
		w.date = d
	}
}

func (w *Windows) newer(q Quota) bool { return !q.ResetAt.IsZero() && q.ResetAt.After(w.reset) }

// Resume returns how long to leave the host alone after a response at now (our clock) said
// its quota q is spent (Observe it first): q.Reset, or less if q's reset is a whole-second
// time and the window, started at its first request and whole seconds long, ends sooner (see
// Windows).
func (w *Windows) Resume(now time.Time, q Quota) time.Duration {
	pause := q.Reset
	if w.verdict < 0 || w.date.IsZero() || q.ResetAt.Nanosecond() != 0 || !q.ResetAt.Equal(w.reset) {
		return pause
	}
	length := q.ResetAt.Sub(w.date) - time.Second
	if length < time.Second {
		return pause
	}
	early := max(w.start.Add(length+windowMargin).Sub(now), 0)
	if early > pause-minWindowGain {
		return pause
	}
	if w.verdict == 0 {
		w.trial, w.until = now.Add(early), now.Add(pause)
	}
	return early
}
