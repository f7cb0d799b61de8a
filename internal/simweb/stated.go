package simweb

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"
)

// HeaderStyle is how a host states its limit on every answer (HostSpec.Headers).
type HeaderStyle int

const (
	// HeadersNone states nothing: the limit is hidden.
	HeadersNone HeaderStyle = iota
	// HeadersIETF sends draft-ietf-httpapi-ratelimit-headers' fields:
	// `RateLimit-Policy: "default";q=Q;w=W` and `RateLimit: "default";r=R;t=T`, with W the
	// spec's PolicyWindow in seconds, Q = Limit·W, R the requests left now and T the whole
	// seconds (rounded up) until the quota is whole again: the bucket full, or the fixed
	// window's end.
	HeadersIETF
	// HeadersX sends the de-facto `X-RateLimit-Limit: Q` (no window), `X-RateLimit-Remaining: R`
	// and `X-RateLimit-Reset`, a Unix time: the end of the PolicyWindow-long window that began
	// at the host's first request (a new one begins when it ends), rounded up to the second.
	// The window is not stated; only the reset tells it.
	HeadersX
	// HeadersXDelta sends `X-RateLimit-Limit: Q` (no window), `X-RateLimit-Remaining: R` and
	// `X-RateLimit-Reset: T`, the limiter's own reset as Envoy-style gateways send it: the
	// whole seconds (rounded up) until the quota is whole again, the bucket full or the fixed
	// window's end. Neither the window nor the refill rate is stated.
	HeadersXDelta
	// HeadersXUnix is HeadersXDelta with the reset as a Unix time (GitHub's form): the time
	// the quota is whole again, rounded up to the second.
	HeadersXUnix
)

// String returns a short name for the style.
func (s HeaderStyle) String() string {
	switch s {
	case HeadersNone:
		return "-"
	case HeadersIETF:
		return "ietf"
	case HeadersX:
		return "x-ratelimit"
	case HeadersXDelta:
		return "x-delta"
	case HeadersXUnix:
		return "x-unix"
	}
	return fmt.Sprintf("HeaderStyle(%d)", int(s))
}

// quotaView is what a host's limit looks like to one request, for its rate-limit headers.
type quotaView struct {
	remaining int
	full      time.Duration // until the quota is whole again (bucket full, window's end)
	windowEnd time.Time     // end of the current PolicyWindow-long window (HeadersX)
}

// quotaLocked returns the host's quota as seen at now, after the request's admission.
// quotaLocked requires h.mu to be held.
func (h *host) quotaLocked(now time.Time) quotaView {
	s := &h.st
	var q quotaView
	if w := h.spec.FixedWindow; w > 0 {
		q.remaining = max(h.spec.windowQuota()-s.winCount, 0)
		q.full = max(s.winStart.Add(w).Sub(now), 0)
	} else {
		tokens := s.lim.TokensAt(now)
		q.remaining = max(int(math.Floor(tokens+1e-9)), 0)
		q.full = time.Duration((float64(h.spec.burst()) - tokens) / float64(s.lim.Limit()) * float64(time.Second))
	}
	if pw := h.spec.PolicyWindow; pw > 0 {
		first := s.stats.FirstRequest
		n := now.Sub(first) / pw
		q.windowEnd = first.Add((n + 1) * pw)
	}
	return q
}

// writeQuota writes the rate-limit headers of HostSpec.Headers for q, seen at now.
func (h *host) writeQuota(hd http.Header, q quotaView, now time.Time) {
	w := h.spec.PolicyWindow
	quota := int(math.Round(h.spec.Limit * w.Seconds()))
	switch h.spec.Headers {
	case HeadersIETF:
		secs := int(math.Ceil(q.full.Seconds() - 1e-9))
		hd.Set("RateLimit-Policy", fmt.Sprintf(`"default";q=%d;w=%d`, quota, int(w.Seconds())))
		hd.Set("RateLimit", fmt.Sprintf(`"default";r=%d;t=%d`, q.remaining, max(secs, 0)))
	case HeadersX:
		reset := q.windowEnd
		if reset.Nanosecond() != 0 {
			reset = reset.Truncate(time.Second).Add(time.Second)
		}
		hd.Set("X-RateLimit-Limit", strconv.Itoa(quota))
		hd.Set("X-RateLimit-Remaining", strconv.Itoa(q.remaining))
		hd.Set("X-RateLimit-Reset", strconv.FormatInt(reset.Unix(), 10))
	case HeadersXDelta, HeadersXUnix:
		hd.Set("X-RateLimit-Limit", strconv.Itoa(quota))
		hd.Set("X-RateLimit-Remaining", strconv.Itoa(q.remaining))
		if h.spec.Headers == HeadersXDelta {
			hd.Set("X-RateLimit-Reset", strconv.Itoa(max(int(math.Ceil(q.full.Seconds()-1e-9)), 0)))
			break
		}
		whole := now.Add(q.full)
		if whole.Nanosecond() != 0 {
			whole = whole.Truncate(time.Second).Add(time.Second)
		}
		hd.Set("X-RateLimit-Reset", strconv.FormatInt(whole.Unix(), 10))
	}
}

// windowQuota is the requests a FixedWindow admits: Limit per second of it, at least one.
func (s *HostSpec) windowQuota() int {
	return max(int(math.Round(s.Limit*s.FixedWindow.Seconds())), 1)
}

// allowLocked takes one unit of the host's limit at now: a token of the bucket, or a place in
// the fixed window (HostSpec.FixedWindow), which begins at the first request after the last
// one ended. It reports false, taking nothing, when none is left, with the time until there is
// one. allowLocked requires h.mu to be held.
func (h *host) allowLocked(now time.Time) (ok bool, wait time.Duration) {
	s := &h.st
	if w := h.spec.FixedWindow; w > 0 {
		if s.winStart.IsZero() || !now.Before(s.winStart.Add(w)) {
			s.winStart, s.winCount = now, 0
		}
		if s.winCount >= h.spec.windowQuota() {
			return false, s.winStart.Add(w).Sub(now)
		}
		s.winCount++
		return true, 0
	}
	if s.lim.AllowN(now, 1) {
		return true, 0
	}
	// The bucket refills at Limit tokens/s; wait is the time until it holds one.
	need := 1 - s.lim.TokensAt(now)
	return false, time.Duration(need / float64(s.lim.Limit()) * float64(time.Second))
}
