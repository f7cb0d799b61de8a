package robots

import (
	"fmt"
	"testing"
	"time"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func TestNextCheck(t *testing.T) {
	for _, tc := range []struct {
		status   int
		failures int
		ttl      time.Duration
		want     time.Duration // after t0
	}{
		{200, 0, 0, DefaultTTL},
		{200, 0, time.Hour, time.Hour},
		{200, 5, time.Hour, time.Hour}, // failures only matter for unreachable results
		{200, 0, -time.Second, DefaultTTL},
		{200, 0, 48 * time.Hour, DefaultTTL}, // never longer than 24h (RFC 9309 §2.4)
		{404, 0, 0, DefaultTTL},
		{301, 0, 2 * time.Hour, 2 * time.Hour},
		{503, 1, 0, time.Minute},
		{503, 0, 0, time.Minute}, // failures < 1 counts as 1
		{503, -3, 0, time.Minute},
		{503, 2, 0, 2 * time.Minute},
		{503, 3, 0, 4 * time.Minute},
		{429, 4, 0, 8 * time.Minute},
		{0, 6, 0, 32 * time.Minute},
		{500, 7, 0, time.Hour}, // 64m capped at 1h
		{500, 8, 0, time.Hour},
		{500, 1 << 30, time.Hour, time.Hour},
	} {
		t.Run(fmt.Sprintf("%d/%d/%v", tc.status, tc.failures, tc.ttl), func(t *testing.T) {
			if got := NextCheck(t0, tc.status, tc.failures, tc.ttl); !got.Equal(t0.Add(tc.want)) {
				t.Errorf("NextCheck = t0+%v, want t0+%v", got.Sub(t0), tc.want)
			}
		})
	}
}

func TestEffective(t *testing.T) {
	good := Parse([]byte("User-agent: *\nDisallow: /private\n"))
	down := DisallowAll()
	for _, tc := range []struct {
		name     string
		latest   *Robots
		since    time.Time
		lastGood *Robots
		now      time.Time
		want     *Robots // compared by identity, except wantKind
		private  bool    // /private allowed?
		public   bool    // /public allowed?
	}{
		{"reachable: latest", good, time.Time{}, nil, t0, good, false, true},
		{"unreachable 1 day, cached copy: disallow all", down, t0, good, t0.Add(24 * time.Hour), down, false, false},
		{"unreachable exactly 30 days: still disallow all", down, t0, good, t0.Add(UnreachableGrace), down, false, false},
		{"unreachable 30 days + 1s, cached copy: cached copy", down, t0, good, t0.Add(UnreachableGrace + time.Second), good, false, true},
		{"unreachable 31 days, no cached copy: allow all", down, t0, nil, t0.Add(31 * 24 * time.Hour), nil, true, true},
		{"unreachable 31 days, cached copy also unreachable: allow all", down, t0, DisallowAll(), t0.Add(31 * 24 * time.Hour), nil, true, true},
		{"unknown since: disallow all", down, time.Time{}, good, t0, down, false, false},
		{"nothing fetched yet: disallow all", nil, time.Time{}, nil, t0, nil, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Effective(tc.latest, tc.since, tc.lastGood, tc.now)
			if tc.want != nil && got != tc.want {
				t.Errorf("Effective returned %p, want %p", got, tc.want)
			}
			if a := got.Test("crawl", "/private").Allowed; a != tc.private {
				t.Errorf("/private allowed = %v, want %v", a, tc.private)
			}
			if a := got.Test("crawl", "/public").Allowed; a != tc.public {
				t.Errorf("/public allowed = %v, want %v", a, tc.public)
			}
		})
	}
}
