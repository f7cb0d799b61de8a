package retry

import (
	"math"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// windowHost is a fixed-window limiter as express-rate-limit runs one: limit requests per
// window; with firstHit the window starts at the first request after the last one ended (else
// windows are aligned to the host's clock); each answer names the reset as a whole-second
// Unix time, rounded up, with a truncated Date. The host's clock is ahead of ours by skew and
// each request takes lat to reach it.
type windowHost struct {
	limit     int
	window    time.Duration
	firstHit  bool
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
	hdr.Set("X-RateLimit-Limit", strconv.Itoa(h.limit))
	hdr.Set("X-RateLimit-Remaining", strconv.Itoa(max(h.limit-h.hits, 0)))
	reset := math.Ceil(float64(h.end.UnixNano()) / 1e9)
	hdr.Set("X-RateLimit-Reset", strconv.FormatInt(int64(reset), 10))
	return refused, hdr, sent.Add(2 * h.lat)
}

// crawlWindows sends n requests as fast as the host's quota allows, one at a time, pausing
// when it is spent as Windows.Resume says (after a refusal, a second), and returns the time
// taken (to the end of the last pause) and the refusals.
func crawlWindows(h *windowHost, n int) (took time.Duration, refusals int, w *Windows) {
	w = &Windows{}
	var sc ServerClock
	start := time.Date(2025, 3, 4, 12, 0, 0, 123e6, time.UTC)
	now := start
	for done := 0; done < n; {
		refused, hdr, received := h.serve(now)
		sc.Observe(hdr.Get("Date"), received)
		q, ok := ParseRateLimit(hdr, sc.Now(received))
		w.Observe(now, hdr.Get("Date"), q, ok, refused)
		next := received.Add(5 * time.Millisecond)
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

func TestWindowsFirstHit(t *testing.T) {
	for _, win := range []time.Duration{time.Second, 2 * time.Second, time.Minute} {
		for _, skew := range []time.Duration{0, 3*time.Second + 700*time.Millisecond, -42 * time.Second} {
			h := &windowHost{limit: 10, window: win, firstHit: true, skew: skew, lat: time.Millisecond}
			took, refusals, w := crawlWindows(h, 200)
			ideal := 20 * win // 20 windows of 10 (the last pause counted)
			t.Logf("window %v skew %v: %v for 200 requests (ideal %v), %d refused, verdict %d", win, skew, took, ideal, refusals, w.verdict)
			if refusals != 0 || w.verdict != 1 {
				t.Errorf("window %v skew %v: %d refused, verdict %d; want 0 and confirmed", win, skew, refusals, w.verdict)
			}
			// Each window: its 10 requests (7 ms each here), then the margin.
			if max := ideal + 20*(windowMargin+80*time.Millisecond); took > max {
				t.Errorf("window %v skew %v: took %v, want at most %v", win, skew, took, max)
			}
		}
	}
}

// TestWindowsAligned: windows aligned to the host's clock end at the named reset: one early
// resume is refused, and after it every pause waits for the reset.
func TestWindowsAligned(t *testing.T) {
	h := &windowHost{limit: 10, window: 2 * time.Second, skew: 700 * time.Millisecond, lat: time.Millisecond}
	took, refusals, w := crawlWindows(h, 200)
	t.Logf("%v for 200 requests, %d refused, verdict %d", took, refusals, w.verdict)
	if refusals > 1 || w.verdict != -1 {
		t.Errorf("%d refused, verdict %d; want at most 1 and refuted", refusals, w.verdict)
	}
	if max := 20*2*time.Second + 2*time.Second; took > max {
		t.Errorf("took %v, want at most %v", took, max)
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
		w.Observe(now.Add(-time.Second), now.Add(-time.Second).Format(http.TimeFormat), q, true, false)
		if got := w.Resume(now, q); got != q.Reset {
			t.Errorf("Resume = %v for %+v, want %v", got, q, q.Reset)
		}
	}
}
