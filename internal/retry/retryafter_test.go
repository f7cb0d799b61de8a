package retry

import (
	"net/http"
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2025, 3, 4, 12, 0, 0, 0, time.UTC)
	at := now.Add(90 * time.Second)
	serverNow := now.Add(time.Hour) // a server whose clock runs an hour ahead
	tests := []struct {
		name   string
		value  string
		date   string
		wait   time.Duration
		wantOK bool
	}{
		{"delta seconds", "120", "", 120 * time.Second, true},
		{"delta zero", "0", "", 0, true},
		{"delta with spaces", "  7 ", "", 7 * time.Second, true},
		{"delta leading zeros", "007", "", 7 * time.Second, true},
		{"delta huge kept", "9000000000", "", 9000000000 * time.Second, true},
		{"delta beyond time.Duration saturates", "9300000000", "", 1<<63 - 1, true},
		{"delta overflowing saturates", "99999999999999999999999", "", 1<<63 - 1, true},
		{"IMF-fixdate", at.Format(http.TimeFormat), "", 90 * time.Second, true},
		{"RFC 850", at.Format(time.RFC850), "", 90 * time.Second, true},
		{"asctime", at.Format(time.ANSIC), "", 90 * time.Second, true},
		{"date in the past", now.Add(-time.Minute).Format(http.TimeFormat), "", 0, true},
		{"Date header cancels clock skew", serverNow.Add(120 * time.Second).Format(http.TimeFormat), serverNow.Format(http.TimeFormat), 120 * time.Second, true},
		{"without Date the skew counts", serverNow.Add(120 * time.Second).Format(http.TimeFormat), "", time.Hour + 120*time.Second, true},
		{"invalid Date header ignored", at.Format(http.TimeFormat), "yesterday", 90 * time.Second, true},
		{"Date header later than the target", at.Format(http.TimeFormat), now.Add(time.Hour).Format(http.TimeFormat), 0, true},
		{"empty", "", "", 0, false},
		{"blank", "   ", "", 0, false},
		{"negative", "-5", "", 0, false},
		{"plus sign", "+5", "", 0, false},
		{"fraction", "1.5", "", 0, false},
		{"garbage", "soon", "", 0, false},
		{"unit", "10s", "", 0, false},
		{"bad date", "Mon, 32 Foo 2025 99:00:00 GMT", "", 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wait, ok := ParseRetryAfter(tc.value, ServerNow(tc.date, now))
			if wait != tc.wait || ok != tc.wantOK {
				t.Errorf("ParseRetryAfter(%q, %q) = %v, %v; want %v, %v", tc.value, tc.date, wait, ok, tc.wait, tc.wantOK)
			}
		})
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	now := time.Date(2025, 3, 4, 12, 0, 0, 0, time.UTC)
	for _, s := range []string{"120", "0", "-1", "", "Wed, 04 Mar 2025 12:01:30 GMT", "Wednesday, 04-Mar-25 12:01:30 GMT",
		"Wed Mar  4 12:01:30 2025", "99999999999999999999", "1.5", "soon"} {
		f.Add(s, "Wed, 04 Mar 2025 13:00:00 GMT")
		f.Add(s, "")
	}
	f.Fuzz(func(t *testing.T, value, date string) {
		wait, ok := ParseRetryAfter(value, ServerNow(date, now))
		if ok && wait < 0 {
			t.Errorf("ParseRetryAfter(%q, %q) = %v, true: negative wait", value, date, wait)
		}
		if !ok && wait != 0 {
			t.Errorf("ParseRetryAfter(%q, %q) = %v, false: want 0 when not ok", value, date, wait)
		}
	})
}
