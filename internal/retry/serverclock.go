package retry

import (
	"net/http"
	"strings"
	"time"
)

// ServerClock bounds one host's clock against ours from the Date headers of its responses, so
// that a time the host names on its own clock (an HTTP-date Retry-After, a Unix-time
// X-RateLimit-Reset) can be waited for no longer than needed, and never less.
//
// A Date header has one-second resolution and is truncated: a response generated at t on the
// host's clock says Date = floor(t), and reaches us after some latency. So Date − (when we
// received it) is at most the host's clock minus ours, and by at most a second plus the
// latency. Measuring a named time against one response's Date (what ServerNow does) waits
// that second's fraction too long on average, half a second per pause. The greatest
// Date − receipt over many responses (received at different fractions of a second) is a far
// tighter bound from below, so Now, which adds it to our clock, is at most the host's clock,
// and a time named on the host's clock is reached on ours no earlier than Now says.
//
// Only the last two generations of 64 observations count, so a clock that drifts slowly is
// followed; a response whose Date is more than maxClockSpread below the bound (the host's
// clock was stepped back, or another server with another clock answered) starts it afresh
// from that response alone, which is what ServerNow would have used.
//
// The zero value knows nothing: Now returns our own clock. A ServerClock is not safe for
// concurrent use.
type ServerClock struct {
	cur, prev time.Duration // the greatest Date − receipt in this generation and the last
	n         int           // observations in this generation; 0 and !known: none yet
	known     bool
}

const (
	clockGeneration = 64
	// maxClockSpread: Date − receipt spreads over the Date's second and the latency; a value
	// further than this below the bound means a different clock.
	maxClockSpread = 2 * time.Second
)

// Observe records a response's Date header (its raw value) and when the response's headers
// were received, on our clock, and returns the Date it read (zero if missing or invalid). A
// missing or invalid Date teaches nothing, nor does one more than a year (maxQuotaDelay) from
// our clock: a clock that wrong is garbage.
func (c *ServerClock) Observe(date string, received time.Time) time.Time {
	d, ok := parseDate(date)
	if !ok {
		return time.Time{}
	}
	off := d.Sub(received)
	if off > maxQuotaDelay || off < -maxQuotaDelay {
		return d
	}
	switch {
	case !c.known || off < c.bound()-maxClockSpread:
		c.cur, c.prev, c.n, c.known = off, off, 1, true
		return d
	case c.n >= clockGeneration:
		c.prev, c.cur, c.n = c.cur, off, 0
	}
	c.cur = max(c.cur, off)
	c.n++
	return d
}

func (c *ServerClock) bound() time.Duration { return max(c.cur, c.prev) }

// Now returns the host's clock at now (our clock), as early as it can be: now plus the bound
// learned, or now when nothing is known.
func (c *ServerClock) Now(now time.Time) time.Time {
	if !c.known {
		return now
	}
	return now.Add(c.bound())
}

// ServerNow returns the host's clock at now as one response's Date header tells it (Date
// itself, when valid), else now: the reference for ParseRetryAfter and ParseRateLimit when no
// ServerClock has learned better.
func ServerNow(date string, now time.Time) time.Time {
	if d, ok := parseDate(date); ok {
		return d
	}
	return now
}

// parseDate parses a Date header's raw value; ok is false when it is missing or invalid.
func parseDate(date string) (time.Time, bool) {
	d, err := http.ParseTime(strings.TrimSpace(date))
	if err != nil {
		return time.Time{}, false
	}
	return d, true
}
