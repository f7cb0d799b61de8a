package retry

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParseRateLimit(t *testing.T) {
	now := time.Date(2025, 3, 4, 12, 0, 0, 0, time.UTC)
	epoch := func(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }
	serverNow := now.Add(time.Hour) // a server whose clock runs an hour ahead
	year := 366 * 24 * time.Hour
	tests := []struct {
		name   string
		header []string // name, value pairs; a name may repeat
		want   Quota
		wantOK bool
	}{
		// Structured fields (draft-ietf-httpapi-ratelimit-headers 08 and later).
		{"structured", []string{"RateLimit", `"default";r=50;t=30`},
			Quota{Remaining: 50, Reset: 30 * time.Second}, true},
		{"structured with its policy", []string{"RateLimit", `"default";r=50;t=30`, "RateLimit-Policy", `"default";q=100;w=60`},
			Quota{50, 30 * time.Second, 100, time.Minute, time.Time{}}, true},
		{"structured spent", []string{"RateLimit", `"default";r=0;t=7`},
			Quota{Remaining: 0, Reset: 7 * time.Second}, true},
		{"structured without reset", []string{"RateLimit", `"default";r=999;pk=:dHJpYWwxMjEzMjM=:`},
			Quota{Remaining: 999}, true},
		{"structured least remaining wins", []string{"RateLimit", `"burst";r=40;t=5, "daily";r=3;t=3600`},
			Quota{Remaining: 3, Reset: time.Hour}, true},
		{"structured tie: longest reset wins", []string{"RateLimit", `"a";r=0;t=1, "b";r=0;t=9`},
			Quota{Remaining: 0, Reset: 9 * time.Second}, true},
		{"structured split over lines", []string{"RateLimit", `"burst";r=40;t=5`, "RateLimit", `"daily";r=3;t=3600`},
			Quota{Remaining: 3, Reset: time.Hour}, true},
		{"policy matched by name", []string{"RateLimit", `"daily";r=3;t=3600`,
			"RateLimit-Policy", `"burst";q=10;w=1, "daily";q=1000;w=86400`},
			Quota{3, time.Hour, 1000, 24 * time.Hour, time.Time{}}, true},
		{"no matching policy: the smallest q/w", []string{"RateLimit", `"other";r=3;t=10`,
			"RateLimit-Policy", `"permin";q=50;w=60,"perhr";q=1000;w=3600`},
			Quota{3, 10 * time.Second, 1000, time.Hour, time.Time{}}, true},
		{"no matching policy: a window beats none", []string{"RateLimit", `"x";r=3`,
			"RateLimit-Policy", `"a";q=1, "b";q=100;w=60`},
			Quota{3, 0, 100, time.Minute, time.Time{}}, true},
		{"policy with units and key", []string{"RateLimit", `"peruser";r=5;t=2`,
			"RateLimit-Policy", `"peruser";q=65535;qu="content-bytes";w=10;pk=:sdfjLJUOUH==:`},
			Quota{5, 2 * time.Second, 65535, 10 * time.Second, time.Time{}}, true},
		{"spaces after semicolons", []string{"RateLimit", `"100-in-1min"; r=0; t=42`,
			"RateLimit-Policy", `"100-in-1min"; q=100; w=60; pk=:ZGVmYXVsdA==:`},
			Quota{0, 42 * time.Second, 100, time.Minute, time.Time{}}, true},
		{"malformed policy ignored", []string{"RateLimit", `"d";r=5;t=2`, "RateLimit-Policy", `"d";q=100;w=60,`},
			Quota{Remaining: 5, Reset: 2 * time.Second}, true},
		{"item without r skipped", []string{"RateLimit", `"a";t=5, "b";r=2;t=1`},
			Quota{Remaining: 2, Reset: time.Second}, true},
		{"negative r skipped", []string{"RateLimit", `"a";r=-1;t=5, "b";r=2;t=1`},
			Quota{Remaining: 2, Reset: time.Second}, true},
		{"token name tolerated", []string{"RateLimit", `default;r=4;t=2`},
			Quota{Remaining: 4, Reset: 2 * time.Second}, true},
		{"negative t ignored", []string{"RateLimit", `"d";r=0;t=-5`}, Quota{}, true},
		{"structured inner list member ignored", []string{"RateLimit", `("a" "b");r=1, "d";r=2;t=3`},
			Quota{Remaining: 2, Reset: 3 * time.Second}, true},

		// Malformed structured fields are ignored whole; another family may still answer.
		{"trailing comma", []string{"RateLimit", `"d";r=0;t=5,`}, Quota{}, false},
		{"unterminated string", []string{"RateLimit", `"d;r=0;t=5`}, Quota{}, false},
		{"integer too long", []string{"RateLimit", `"d";r=1234567890123456;t=5`}, Quota{}, false},
		{"uppercase key", []string{"RateLimit", `"d";R=0;T=5`}, Quota{}, false},
		{"r not an integer", []string{"RateLimit", `"d";r=1.5;t=5`}, Quota{}, false},
		{"malformed structured, X- used", []string{"RateLimit", `"d";r=0;;t=5`, "X-RateLimit-Remaining", "7"},
			Quota{Remaining: 7}, true},

		// Draft 07: one Dictionary.
		{"draft-07 dictionary", []string{"RateLimit", "limit=100, remaining=50, reset=5", "RateLimit-Policy", "100;w=10"},
			Quota{50, 5 * time.Second, 100, 10 * time.Second, time.Time{}}, true},
		{"draft-07 without remaining", []string{"RateLimit", "limit=100, reset=5"}, Quota{}, false},
		{"draft-07 last duplicate wins", []string{"RateLimit", "remaining=50, remaining=0, reset=5"},
			Quota{Remaining: 0, Reset: 5 * time.Second}, true},

		// Earlier drafts: three fields.
		{"draft fields", []string{"RateLimit-Limit", "100", "RateLimit-Remaining", "0", "RateLimit-Reset", "12"},
			Quota{Remaining: 0, Reset: 12 * time.Second, Limit: 100}, true},
		{"draft limit with policy", []string{"RateLimit-Limit", "100, 100;w=60", "RateLimit-Remaining", "9", "RateLimit-Reset", "12"},
			Quota{9, 12 * time.Second, 100, time.Minute, time.Time{}}, true},
		{"draft limit with several policies", []string{"RateLimit-Limit", "10, 10;w=1, 50;w=60", "RateLimit-Remaining", "9"},
			Quota{Remaining: 9, Limit: 10, Window: time.Second}, true},
		{"draft limit with its own window", []string{"RateLimit-Limit", "100;w=60", "RateLimit-Remaining", "9"},
			Quota{Remaining: 9, Limit: 100, Window: time.Minute}, true},
		{"draft-06 policy field", []string{"RateLimit-Limit", "10", "RateLimit-Remaining", "1", "RateLimit-Policy", "10;w=1, 50;w=60"},
			Quota{Remaining: 1, Limit: 10, Window: time.Second}, true},
		{"draft garbage limit", []string{"RateLimit-Limit", "lots", "RateLimit-Remaining", "1", "RateLimit-Reset", "2"},
			Quota{Remaining: 1, Reset: 2 * time.Second}, true},
		{"draft garbage reset", []string{"RateLimit-Remaining", "0", "RateLimit-Reset", "soon"}, Quota{}, true},
		{"draft negative remaining", []string{"RateLimit-Remaining", "-1", "RateLimit-Reset", "2"}, Quota{}, false},
		{"draft reset as epoch", []string{"RateLimit-Remaining", "0", "RateLimit-Reset", epoch(now.Add(20 * time.Second))},
			Quota{Reset: 20 * time.Second}, true},
		{"draft structured beats X-", []string{"RateLimit-Remaining", "3", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "60"},
			Quota{Remaining: 3}, true},

		// De-facto X-RateLimit-*.
		{"x delta", []string{"X-RateLimit-Limit", "60", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "42"},
			Quota{Remaining: 0, Reset: 42 * time.Second, Limit: 60}, true},
		{"x fractional delta", []string{"X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "1.25"},
			Quota{Reset: 1250 * time.Millisecond}, true},
		{"x epoch against now", []string{"X-RateLimit-Remaining", "0", "X-RateLimit-Reset", epoch(now.Add(90 * time.Second))},
			Quota{Reset: 90 * time.Second}, true},
		{"x epoch with fraction", []string{"X-RateLimit-Remaining", "0", "X-RateLimit-Reset", epoch(now.Add(90*time.Second)) + ".5"},
			Quota{Reset: 90500 * time.Millisecond}, true},
		{"x epoch: Date cancels clock skew", []string{"X-RateLimit-Remaining", "0",
			"X-RateLimit-Reset", epoch(serverNow.Add(30 * time.Second)), "Date", serverNow.Format(http.TimeFormat)},
			Quota{Reset: 30 * time.Second}, true},
		{"x epoch: without Date the skew counts", []string{"X-RateLimit-Remaining", "0",
			"X-RateLimit-Reset", epoch(serverNow.Add(30 * time.Second))},
			Quota{Reset: time.Hour + 30*time.Second}, true},
		{"x epoch: invalid Date ignored", []string{"X-RateLimit-Remaining", "0",
			"X-RateLimit-Reset", epoch(now.Add(30 * time.Second)), "Date", "yesterday"},
			Quota{Reset: 30 * time.Second}, true},
		{"x epoch in the past", []string{"X-RateLimit-Remaining", "0", "X-RateLimit-Reset", epoch(now.Add(-time.Minute))},
			Quota{}, true},
		{"x delta does not use Date", []string{"X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "30",
			"Date", serverNow.Format(http.TimeFormat)}, Quota{Reset: 30 * time.Second}, true},
		{"x spaces", []string{"X-RateLimit-Remaining", " 4 ", "X-RateLimit-Reset", " 9 "},
			Quota{Remaining: 4, Reset: 9 * time.Second}, true},
		{"x huge reset clamped", []string{"X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "999999999"},
			Quota{Reset: year}, true},
		{"x huge epoch clamped", []string{"X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "99999999999999999999999999"},
			Quota{Reset: year}, true},
		{"x negative remaining", []string{"X-RateLimit-Remaining", "-3", "X-RateLimit-Reset", "9"}, Quota{}, false},
		{"x overflowing remaining", []string{"X-RateLimit-Remaining", "99999999999999999999", "X-RateLimit-Reset", "9"}, Quota{}, false},
		{"x garbage remaining", []string{"X-RateLimit-Remaining", "none", "X-RateLimit-Reset", "9"}, Quota{}, false},
		{"x garbage reset", []string{"X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "1e9"}, Quota{}, true},
		{"x negative reset", []string{"X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "-5"}, Quota{}, true},
		{"x garbage limit", []string{"X-RateLimit-Limit", "∞", "X-RateLimit-Remaining", "2"}, Quota{Remaining: 2}, true},

		{"none", nil, Quota{}, false},
		{"only a limit", []string{"X-RateLimit-Limit", "60", "RateLimit-Policy", `"d";q=1;w=1`}, Quota{}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			for i := 0; i+1 < len(tc.header); i += 2 {
				h.Add(tc.header[i], tc.header[i+1])
			}
			q, ok := ParseRateLimit(h, ServerNow(h.Get("Date"), now))
			q.ResetAt = time.Time{} // TestParseRateLimitResetAt
			if q != tc.want || ok != tc.wantOK {
				t.Errorf("ParseRateLimit(%v) = %+v, %v; want %+v, %v", h, q, ok, tc.want, tc.wantOK)
			}
		})
	}
}

// TestParseRateLimitResetAt: a reset named as a Unix time is also kept as that time (on the
// server's clock, whatever ref says); a delay names none.
func TestParseRateLimitResetAt(t *testing.T) {
	ref := time.Date(2025, 3, 4, 12, 0, 0, 0, time.UTC)
	at := time.Date(2025, 3, 4, 13, 0, 7, 0, time.UTC) // the server's clock is an hour ahead
	tests := []struct {
		name   string
		header []string
		want   time.Time
	}{
		{"x epoch", []string{"X-RateLimit-Remaining", "0", "X-RateLimit-Reset", strconv.FormatInt(at.Unix(), 10)}, at},
		{"x epoch with fraction", []string{"X-RateLimit-Remaining", "0", "X-RateLimit-Reset", strconv.FormatInt(at.Unix(), 10) + ".25"},
			at.Add(250 * time.Millisecond)},
		{"x delta", []string{"X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "7"}, time.Time{}},
		{"draft epoch", []string{"RateLimit-Remaining", "0", "RateLimit-Reset", strconv.FormatInt(at.Unix(), 10)}, at},
		{"structured delta", []string{"RateLimit", `"d";r=0;t=7`}, time.Time{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			for i := 0; i+1 < len(tc.header); i += 2 {
				h.Add(tc.header[i], tc.header[i+1])
			}
			q, ok := ParseRateLimit(h, ref)
			if !ok || !q.ResetAt.Equal(tc.want) {
				t.Errorf("ResetAt %v (ok %v), want %v", q.ResetAt, ok, tc.want)
			}
		})
	}
}

func FuzzParseRateLimit(f *testing.F) {
	now := time.Date(2025, 3, 4, 12, 0, 0, 0, time.UTC)
	date := "Wed, 04 Mar 2025 13:00:00 GMT"
	f.Add(`"default";r=50;t=30`, `"default";q=100;w=60`, "", "", "", date)
	f.Add(`"a";r=0;t=1, "b";r=2;t=9;pk=:QXBwLTk5OQ==:`, `"b";q=10;w=1,"a";q=1000;w=3600`, "", "", "", "")
	f.Add("limit=100, remaining=0, reset=5", "100;w=10", "", "", "", "")
	f.Add(`("x" "y");r=1, ?1;a=@1700000000`, `"x";q=-1;w=0`, "0", "3.5", "", "")
	f.Add("", "10;w=1, 50;w=60", "0", "12", "", "")
	f.Add("", "", "", "", "1741093230", date)
	f.Add("", "", "", "", "99999999999999999999.999", "")
	f.Fuzz(func(t *testing.T, rl, policy, remaining, reset, xreset, date string) {
		h := http.Header{}
		for _, kv := range [][2]string{{"RateLimit", rl}, {"RateLimit-Policy", policy}, {"RateLimit-Remaining", remaining},
			{"RateLimit-Reset", reset}, {"X-RateLimit-Remaining", remaining}, {"X-RateLimit-Reset", xreset},
			{"X-RateLimit-Limit", strings.ToUpper(remaining)}, {"Date", date}} {
			if kv[1] != "" {
				h.Set(kv[0], kv[1])
			}
		}
		q, ok := ParseRateLimit(h, ServerNow(h.Get("Date"), now))
		if !ok && q != (Quota{}) {
			t.Errorf("ParseRateLimit(%v) = %+v, false: want the zero Quota when not ok", h, q)
		}
		if q.Remaining < 0 || q.Limit < 0 || q.Reset < 0 || q.Reset > maxQuotaDelay || q.Window < 0 || q.Window > maxQuotaDelay {
			t.Errorf("ParseRateLimit(%v) = %+v, %v: out of range", h, q, ok)
		}
		if q2, ok2 := ParseRateLimit(h, ServerNow(h.Get("Date"), now)); q2 != q || ok2 != ok {
			t.Errorf("ParseRateLimit(%v) not deterministic: %+v, %v then %+v, %v", h, q, ok, q2, ok2)
		}
	})
}
