package retry

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// windowHost is a fixed-window limiter as express-rate-limit runs one: limit requests per
// window; with firstHit the window starts at the first request after the last one ended (else
// windows are aligned to the host's clock); each answer has a truncated Date and names the
// reset as express-rate-limit does in the style given: "legacy" X-RateLimit-* (a whole-second
// Unix time, rounded up) or "draft-6" RateLimit-* (seconds from the answer, rounded up, and
// the policy). The host's clock is ahead of ours by skew and each request takes lat to reach it.
type windowHost struct {
	limit     int
	window    time.Duration
	firstHit  bool
	style     string
	skew, lat time.Duration

	end  time.Time // the current window's end, on the host's clock
	hits int
}

// serve answers a request sent at sent (our clock): whether it was refused, the headers, and
// when the answer arrives (our clock).
func (h *windowHost) serve(sent time.Time) (refused bool, hdr http.Header, received time.Time) {
	at := sent.Add(h.lat).Add(h.skew) // the host's clock on arrival
	if !at.Before(h.end) {
		start := at
		if !h.firstHit {
			start = at.Truncate(h.window)
		}
		h.end, h.hits = start.Add(h.window), 0
	}
	h.hits++
	refused = h.hits > h.limit
	hdr = http.Header{}
	hdr.Set("Date", at.UTC().Format(http.TimeFormat))
	remaining := strconv.Itoa(max(h.limit-h.hits, 0))
	if h.style == "draft-6" {
		hdr.Set("RateLimit-Policy", fmt.Sprintf("%d;w=%d", h.limit, int(h.window.Seconds())))
		hdr.Set("RateLimit-Limit", strconv.Itoa(h.limit))
		hdr.Set("RateLimit-Remaining", remaining)
		hdr.Set("RateLimit-Reset", strconv.Itoa(int(math.Ceil(h.end.Sub(at).Seconds()))))
	} else {
		hdr.Set("X-RateLimit-Limit", strconv.Itoa(h.limit))
		hdr.Set("X-RateLimit-Remaining", remaining)
		reset := math.Ceil(float64(h.end.UnixNano()) / 1e9)
		hdr.Set("X-RateLimit-Reset", strconv.FormatInt(int64(reset), 10))
	}
	return refused, hdr, sent.Add(2 * h.lat)
}

// crawlWindows sends n requests one at a time, spacing apart, pausing
// when it is spent as Windows.Resume says (after a refusal, a second), and returns the time
// taken (to the end of the last pause) and the refusals.
func crawlWindows(h *windowHost, n int, spacing time.Duration) (took time.Duration, refusals int, w *Windows) {
	w = &Windows{}
	var sc ServerClock
	start := time.Date(2025, 3, 4, 12, 0, 0, 123e6, time.UTC)
	now := start
	for done := 0; done < n; {
		refused, hdr, received := h.serve(now)
		date := sc.Observe(hdr.Get("Date"), received)
		q, ok := ParseRateLimit(hdr, sc.Now(received))
		w.Observe(now, date, q, ok, refused)
		next := received.Add(spacing)
		switch {
		case refused:
			refusals++
			next = received.Add(time.Second) // as a Retry-After of 1 would
		case ok && q.Remaining == 0:
			done++
			next = received.Add(w.Resume(received, q))
		default:
			done++
		}
		now = next
	}
	return now.Sub(start), refusals, w
}

// TestWindowsFirstHit: windows that start at the first request end that long after it, in
// either header style, whatever the host's clock says. Waiting for the named reset instead
// took 40 s for 200 requests at 10 per 1-s window in the legacy style, 26 s in draft 6's (its requests 30 ms apart).
func TestWindowsFirstHit(t *testing.T) {
	for _, tc := range []struct {
		style string
		win   time.Duration
		skew  time.Duration
	}{
		{"legacy", time.Second, 0}, {"legacy", time.Second, 3*time.Second + 700*time.Millisecond},
		{"legacy", time.Second, -42 * time.Second}, {"legacy", 2 * time.Second, 3*time.Second + 700*time.Millisecond},
		{"legacy", time.Minute, 0}, {"draft-6", time.Second, 0}, {"draft-6", 2 * time.Second, -42 * time.Second},
		{"draft-6", time.Minute, 3*time.Second + 700*time.Millisecond},
	} {
		win, skew := tc.win, tc.skew
		t.Run(fmt.Sprintf("%s %v skew %v", tc.style, win, skew), func(t *testing.T) {
			h := &windowHost{limit: 10, window: win, firstHit: true, style: tc.style, skew: skew, lat: time.Millisecond}
			// A draft-style reset counts from the answer that spent the quota, so waiting for
			// it costs the time the window's requests took: 30 ms apart, 0.3 s a window.
			spacing := 5 * time.Millisecond
			if tc.style == "draft-6" {
				spacing = 30 * time.Millisecond
			}
			took, refusals, w := crawlWindows(h, 200, spacing)
			ideal := 20 * win // 20 windows of 10 (the last pause counted)
			t.Logf("window %v skew %v: %v for 200 requests (ideal %v), %d refused, verdict %d", win, skew, took, ideal, refusals, w.verdict)
			if refusals != 0 || w.verdict != 1 {
				t.Errorf("window %v skew %v: %d refused, verdict %d; want 0 and confirmed", win, skew, refusals, w.verdict)
			}
			// Each window: the margin, and the last window's 10 requests.
			if max := ideal + 20*windowMargin + 10*(spacing+2*h.lat) + 10*time.Millisecond; took > max {
				t.Errorf("window %v skew %v: took %v, want at most %v", win, skew, took, max)
			}
		})
	}
}

// TestWindowsAligned: windows aligned to the host's clock end at the named reset. In the legacy
// style one early resume is refused, and after it every pause waits for the reset; with the
// policy's window known (draft 6) no resume comes before the window's end, which is no later
// than its length after its first request.
func TestWindowsAligned(t *testing.T) {
	for _, style := range []string{"legacy", "draft-6"} {
		t.Run(style, func(t *testing.T) {
			h := &windowHost{limit: 10, window: 2 * time.Second, style: style, skew: 700 * time.Millisecond, lat: time.Millisecond}
			took, refusals, w := crawlWindows(h, 200, 5*time.Millisecond)
			t.Logf("%v for 200 requests, %d refused, verdict %d", took, refusals, w.verdict)
			switch {
			case style == "legacy" && (refusals > 1 || w.verdict != -1):
				t.Errorf("%d refused, verdict %d; want at most 1 and refuted", refusals, w.verdict)
			case style == "draft-6" && refusals > 0:
				t.Errorf("%d refused, want none", refusals)
			}
			if max := 20*2*time.Second + 2*time.Second; took > max {
				t.Errorf("took %v, want at most %v", took, max)
			}
		})
	}
}

// TestWindowsOnlyWholeSecondResets: a delay, or a reset time with a fraction, is waited for
// as named.
func TestWindowsOnlyWholeSecondResets(t *testing.T) {
	now := time.Date(2025, 3, 4, 12, 0, 0, 0, time.UTC)
	for _, q := range []Quota{
		{Reset: 2 * time.Second},
		{Reset: 1500 * time.Millisecond, ResetAt: now.Add(1500 * time.Millisecond)},
	} {
		var w Windows
		w.Observe(now.Add(-time.Second), now.Add(-time.Second), q, true, false)
		if got := w.Resume(now, q); got != q.Reset {
			t.Errorf("Resume = %v for %+v, want %v", got, q, q.Reset)
		}
	}
}
