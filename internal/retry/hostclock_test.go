package retry

import (
	"net/http"
	"testing"
	"time"
)

func TestHostClockPause(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	skew := 7 * time.Second // the host's clock is ahead of ours
	date := now.Add(skew).UTC().Format(http.TimeFormat)
	tests := []struct {
		name        string
		status      int
		header      http.Header
		wait, pause time.Duration
	}{
		{"429 delta-seconds", 429, http.Header{"Retry-After": {"3"}}, 3 * time.Second, 3 * time.Second},
		{"503 HTTP-date on the host's clock", 503, http.Header{"Date": {date},
			"Retry-After": {now.Add(skew + 2*time.Second).UTC().Format(http.TimeFormat)}}, 2 * time.Second, 2 * time.Second},
		{"200 ignores Retry-After", 200, http.Header{"Retry-After": {"3"}}, 0, 0},
		{"200 with a spent quota of one", 200, http.Header{"X-Ratelimit-Limit": {"1"}, "X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"4"}}, 0, 4 * time.Second},
		{"200 with a spent quota not known to be a count", 200, http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"4"}}, 0, 0},
		{"429 with a spent quota", 429, http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"4"}}, 0, 4 * time.Second},
		{"429 bare", 429, http.Header{}, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h HostClock
			wait, pause := h.Pause(tt.status, tt.header, now, now, now)
			if wait != tt.wait || pause != tt.pause {
				t.Errorf("Pause = %v, %v; want %v, %v", wait, pause, tt.wait, tt.pause)
			}
		})
	}
}
