package retry

import (
	"net/http"
	"time"
)

// HostClock is what a client knows of one host's clock and quota windows: the ServerClock its
// Date headers bound, and the Windows of its spent quotas. Pause reads one response with it.
// The zero value is ready to use. A HostClock is not safe for concurrent use.
type HostClock struct {
	clock   ServerClock
	windows Windows
}

// Pause returns how long the whole host must be left alone after a response with status and
// header: the Retry-After of a "slow down" status (StatusKind.SlowDown), or, on a response of
// any status (200 included), the time until the reset of a quota its rate-limit headers say is
// spent (ParseRateLimit, shortened by Windows), whichever is longer. wait is the Retry-After
// alone (0 if none): the host's explicit "slow down" and a retry's floor, which a spent quota on
// a success is not.
//
// sent is when the request went out and received when the response's headers came (both on
// our clock; received no later than now). A time the response names on the host's clock (an
// HTTP-date, a Unix-time reset) is measured against that clock as the Date headers of the
// host's responses so far bound it (ServerClock).
func (h *HostClock) Pause(status int, header http.Header, sent, received, now time.Time) (wait, pause time.Duration) {
	refused := KindOf(status).SlowDown()
	date := h.clock.Observe(header.Get("Date"), received)
	ref := h.clock.Now(now)
	if refused {
		if w, ok := ParseRetryAfter(header.Get("Retry-After"), ref); ok {
			wait = w
		}
	}
	pause = wait
	q, ok := ParseRateLimit(header, ref)
	h.windows.Observe(sent, date, q, ok, refused)
	if ok && q.Remaining <= 0 {
		pause = max(pause, h.windows.Resume(now, q))
	}
	return wait, pause
}
