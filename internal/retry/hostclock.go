package retry

import (
	"net/http"
	"time"
)

// HostClock is what a client knows of one host's clock, quota windows and stated policy: the
// ServerClock its Date headers bound, the Windows of its spent quotas and the PolicyReader of
// its rate-limit headers. Read reads one response with them. The zero value is ready to use.
// A HostClock is not safe for concurrent use.
type HostClock struct {
	clock   ServerClock
	windows Windows
	policy  PolicyReader
}

// Answer is what one response tells about its host.
type Answer struct {
	// Wait is the Retry-After of a "slow down" status (0 if none): the host's explicit "slow
	// down" and a retry's floor.
	Wait time.Duration
	// Pause is how long the whole host must be left alone: Wait, or the time a spent quota
	// needs to come back, whichever is longer.
	Pause time.Duration
	// Stated is the policy the rate-limit headers state (PolicyReader.Read); zero if none, or
	// if they contradict themselves.
	Stated Stated
}

// Read reads a response with status and header. Its Pause is the Retry-After of a "slow
// down" status (StatusKind.SlowDown), or, on a response of any status (200 included) whose
// rate-limit headers say the quota is spent (ParseRateLimit), the time it needs to come back,
// whichever is longer: under a stated policy, one interval when the quota is a refilling
// bucket's; otherwise the reset, shortened by Windows. With no policy read, a spent quota
// pauses only when it is known to be a count, or on a refusal (PolicyReader.spentPause).
//
// sent is when the request went out and received when the response's headers came (both on
// our clock; received no later than now). A time the response names on the host's clock (an
// HTTP-date, a Unix-time reset) is measured against that clock as the Date headers of the
// host's responses so far bound it (ServerClock).
func (h *HostClock) Read(status int, header http.Header, sent, received, now time.Time) Answer {
	var a Answer
	refused := KindOf(status).SlowDown()
	date := h.clock.Observe(header.Get("Date"), received)
	ref := h.clock.Now(now)
	if refused {
		if w, ok := ParseRetryAfter(header.Get("Retry-After"), ref); ok {
			a.Wait = w
		}
	}
	a.Pause = a.Wait
	q, ok := ParseRateLimit(header, ref)
	h.windows.Observe(sent, date, q, ok, refused)
	a.Stated, _ = h.policy.Read(header, ref)
	if ok {
		h.policy.counts(q)
		if !refused && status < 400 {
			h.policy.answered(sent, q)
		}
	}
	if ok && q.Remaining <= 0 {
		h.policy.spent(received, now.Add(q.Reset))
		if refused || status >= 400 {
			h.policy.refusedSpent()
		}
		if d, untilReset := h.policy.spentPause(a.Stated, q, refused); untilReset {
			a.Pause = max(a.Pause, h.windows.Resume(now, q))
		} else {
			a.Pause = max(a.Pause, d)
		}
	}
	return a
}

// Pause is Read's Wait and Pause.
func (h *HostClock) Pause(status int, header http.Header, sent, received, now time.Time) (wait, pause time.Duration) {
	a := h.Read(status, header, sent, received, now)
	return a.Wait, a.Pause
}
