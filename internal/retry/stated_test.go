package retry

import (
	"math"
	"net/http"
	"strconv"
	"testing"
	"time"
)

func TestPolicyReaderRead(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	unix := func(d time.Duration) string { return strconv.FormatInt(now.Add(d).Unix(), 10) }
	tests := []struct {
		name   string
		header http.Header
		want   Stated
		ok     bool
	}{
		{"IETF bucket", http.Header{"Ratelimit-Policy": {`"default";q=200;w=10`}, "Ratelimit": {`"default";r=3;t=1`}},
			Stated{Quota: 200, Window: 10 * time.Second}, true},
		{"IETF, the named policy", http.Header{"Ratelimit-Policy": {`"a";q=10;w=1, "b";q=600;w=60`}, "Ratelimit": {`"b";r=3;t=1`}},
			Stated{Quota: 600, Window: time.Minute}, true},
		{"earlier drafts' trio", http.Header{"Ratelimit-Limit": {"100, 100;w=60"}, "Ratelimit-Remaining": {"5"}, "Ratelimit-Reset": {"30"}},
			Stated{Quota: 100, Window: time.Minute}, true},
		{"X- with its window", http.Header{"X-Ratelimit-Limit": {"3000, 3000;w=60"}, "X-Ratelimit-Remaining": {"9"}, "X-Ratelimit-Reset": {"1"}},
			Stated{Quota: 3000, Window: time.Minute}, true},
		{"X- per minute, told by a Unix reset", http.Header{"X-Ratelimit-Limit": {"3000"}, "X-Ratelimit-Remaining": {"9"}, "X-Ratelimit-Reset": {unix(59 * time.Second)}},
			Stated{Quota: 3000, Window: time.Minute, Inferred: true}, true},
		{"X- per hour, told by a delay", http.Header{"X-Ratelimit-Limit": {"5000"}, "X-Ratelimit-Remaining": {"4999"}, "X-Ratelimit-Reset": {"3599"}},
			Stated{Quota: 5000, Window: time.Hour, Inferred: true}, true},
		{"X- reset of a 2-s window, rounded up and read against a clock a second behind, tells nothing",
			http.Header{"X-Ratelimit-Limit": {"20"}, "X-Ratelimit-Remaining": {"12"}, "X-Ratelimit-Reset": {unix(4 * time.Second)}},
			Stated{}, false},
		{"X- reset of half a minute tells nothing", http.Header{"X-Ratelimit-Limit": {"20"}, "X-Ratelimit-Remaining": {"12"}, "X-Ratelimit-Reset": {"30"}},
			Stated{}, false},
		{"X- reset over half a minute: a minute", http.Header{"X-Ratelimit-Limit": {"20"}, "X-Ratelimit-Remaining": {"12"}, "X-Ratelimit-Reset": {"31"}},
			Stated{Quota: 20, Window: time.Minute, Inferred: true}, true},
		{"X- reset a second away tells nothing", http.Header{"X-Ratelimit-Limit": {"10"}, "X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"1"}},
			Stated{}, false},
		{"X- reset beyond an hour tells nothing", http.Header{"X-Ratelimit-Limit": {"10"}, "X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"86400"}},
			Stated{}, false},
		{"remaining above the quota", http.Header{"Ratelimit-Policy": {`"default";q=20;w=10`}, "Ratelimit": {`"default";r=50;t=1`}},
			Stated{}, false},
		{"reset beyond the window", http.Header{"Ratelimit-Policy": {`"default";q=20;w=10`}, "Ratelimit": {`"default";r=0;t=40`}},
			Stated{}, false},
		{"forms disagree", http.Header{"Ratelimit-Policy": {`"default";q=200;w=10`}, "Ratelimit": {`"default";r=3;t=1`},
			"X-Ratelimit-Limit": {"100;w=10"}, "X-Ratelimit-Remaining": {"3"}}, Stated{}, false},
		{"forms agree", http.Header{"Ratelimit-Policy": {`"default";q=200;w=10`}, "Ratelimit": {`"default";r=3;t=1`},
			"X-Ratelimit-Limit": {"1200;w=60"}, "X-Ratelimit-Remaining": {"3"}}, Stated{Quota: 200, Window: 10 * time.Second}, true},
		{"a contradicting X- form spoils an IETF one", http.Header{"Ratelimit-Policy": {`"default";q=200;w=10`}, "Ratelimit": {`"default";r=3;t=1`},
			"X-Ratelimit-Limit": {"5"}, "X-Ratelimit-Remaining": {"9"}}, Stated{}, false},
		{"absurd quota", http.Header{"Ratelimit-Policy": {`"default";q=999999999999;w=1`}, "Ratelimit": {`"default";r=3;t=1`}},
			Stated{}, false},
		{"zero quota", http.Header{"Ratelimit-Policy": {`"default";q=0;w=1`}, "Ratelimit": {`"default";r=0;t=1`}},
			Stated{}, false},
		{"no window", http.Header{"Ratelimit-Policy": {`"default";q=20`}, "Ratelimit": {`"default";r=3;t=1`}},
			Stated{}, false},
		{"malformed", http.Header{"Ratelimit-Policy": {`"default";q=20;w=`}, "Ratelimit": {`"default";r=3;t=1`}},
			Stated{}, false},
		{"nothing", http.Header{}, Stated{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p PolicyReader
			got, ok := p.Read(tt.header, now)
			if got != tt.want || ok != tt.ok {
				t.Errorf("Read = %+v, %v; want %+v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

// TestPolicyReaderInfersFromLongest: an hour's window is inferred once a reset beyond a minute
// is seen, even if the first answers came in the window's last minute.
func TestPolicyReaderInfersFromLongest(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	var p PolicyReader
	h := func(reset string) http.Header {
		return http.Header{"X-Ratelimit-Limit": {"5000"}, "X-Ratelimit-Remaining": {"10"}, "X-Ratelimit-Reset": {reset}}
	}
	for i, tc := range []struct {
		reset string
		win   time.Duration
	}{{"1", 0}, {"45", time.Minute}, {"3500", time.Hour}, {"20", time.Hour}} {
		s, ok := p.Read(h(tc.reset), now)
		if s.Window != tc.win || ok != (tc.win > 0) {
			t.Errorf("answer %d (reset %s): %+v, %v; want window %v", i+1, tc.reset, s, ok, tc.win)
		}
	}
}

func TestHostClockRead(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	ietf := func(r, t int) http.Header {
		return http.Header{"Ratelimit-Policy": {`"default";q=200;w=10`}, "Ratelimit": {`"default";r=` + strconv.Itoa(r) + `;t=` + strconv.Itoa(t)}}
	}
	x := func(r int, reset time.Duration) http.Header {
		return http.Header{"X-Ratelimit-Limit": {"600"}, "X-Ratelimit-Remaining": {strconv.Itoa(r)},
			"X-Ratelimit-Reset": {strconv.FormatInt(now.Add(reset).Unix(), 10)}}
	}
	bare := func(limit string, r int, reset string) http.Header { // no window; reset in delta seconds
		h := http.Header{"X-Ratelimit-Remaining": {strconv.Itoa(r)}, "X-Ratelimit-Reset": {reset}}
		if limit != "" {
			h.Set("X-Ratelimit-Limit", limit)
		}
		return h
	}
	type answer struct {
		status int
		header http.Header
	}
	tests := []struct {
		name   string
		before []answer // earlier answers of the host
		last   answer
		pause  time.Duration
		rate   float64
	}{
		{"bucket with tokens", nil, answer{200, ietf(3, 1)}, 0, 20},
		{"bucket spent: one token, not the rounded reset", nil, answer{200, ietf(0, 1)}, 50 * time.Millisecond, 20},
		{"spent far from its reset, never half the quota seen: a bucket's burst", []answer{{200, ietf(5, 1)}},
			answer{200, ietf(0, 8)}, 50 * time.Millisecond, 20},
		{"X- bucket with a window's reset", []answer{{200, x(1, 60*time.Second)}},
			answer{200, x(0, 59*time.Second)}, 100 * time.Millisecond, 10},
		{"window spent after its quota was seen: its reset", []answer{{200, ietf(199, 10)}},
			answer{200, ietf(0, 8)}, 8 * time.Second, 20},
		{"refused with Retry-After: the longer", nil,
			answer{429, func() http.Header { h := ietf(0, 1); h.Set("Retry-After", "1"); return h }()}, time.Second, 20},
		{"two refusals with a spent quota: the reset", []answer{{429, ietf(0, 8)}},
			answer{429, ietf(0, 8)}, 8 * time.Second, 20},
		{"no window, a bucket's burst of a limit per minute spent: no pause", []answer{{200, x(0, time.Second)}},
			answer{200, x(0, time.Second)}, 0, 0},
		{"no window, counted down from its limit: the reset", []answer{{200, bare("10", 9, "1")}},
			answer{200, bare("10", 0, "1")}, time.Second, 0},
		{"no window, refused with a spent quota: the reset", nil, answer{429, bare("600", 0, "3")}, 3 * time.Second, 0},
		{"no limit, after a refusal with a spent quota: a reset past a token", []answer{{429, bare("", 0, "5")}},
			answer{200, bare("", 0, "5")}, 5 * time.Second, 0},
		{"no limit, after a refusal with a spent quota: a bucket's next token", []answer{{429, bare("", 0, "1")}},
			answer{200, bare("", 0, "1")}, 0, 0},
		{"no limit, nothing known: no pause", nil, answer{200, bare("", 0, "5")}, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h HostClock
			for _, b := range tt.before {
				h.Read(b.status, b.header, now, now, now)
			}
			a := h.Read(tt.last.status, tt.last.header, now, now, now)
			if a.Pause != tt.pause || math.Abs(a.Stated.Rate()-tt.rate) > 1e-9 {
				t.Errorf("Read = %+v (rate %v); want pause %v, rate %v", a, a.Stated.Rate(), tt.pause, tt.rate)
			}
		})
	}
}

func FuzzPolicyReader(f *testing.F) {
	now := time.Date(2025, 3, 4, 12, 0, 0, 0, time.UTC)
	f.Add(`"default";r=50;t=30`, `"default";q=100;w=60`, "", "", "", "")
	f.Add(`"default";r=0;t=1`, `"default";q=200;w=10`, "3000", "0", "1741093230", "Wed, 04 Mar 2025 12:00:00 GMT")
	f.Add("", "", "3000, 3000;w=60", "9", "1", "")
	f.Add("", "", "5000", "4999", "3599", "")
	f.Add("", "", "99999999999999999999", "1", "99999999999999999999.9", "")
	f.Fuzz(func(t *testing.T, rl, policy, xlimit, xremaining, xreset, date string) {
		h := http.Header{}
		for _, kv := range [][2]string{{"RateLimit", rl}, {"RateLimit-Policy", policy}, {"X-RateLimit-Limit", xlimit},
			{"X-RateLimit-Remaining", xremaining}, {"X-RateLimit-Reset", xreset}, {"Date", date}} {
			if kv[1] != "" {
				h.Set(kv[0], kv[1])
			}
		}
		var p PolicyReader
		s, ok := p.Read(h, ServerNow(h.Get("Date"), now))
		if !ok && s != (Stated{}) {
			t.Errorf("Read(%v) = %+v, false: want the zero Stated", h, s)
		}
		if ok {
			r := s.Rate()
			if !(r > 0) || math.IsInf(r, 0) || s.Quota > maxStatedQuota || s.Window <= 0 || s.Window > maxQuotaDelay || s.Interval() <= 0 {
				t.Errorf("Read(%v) = %+v (rate %v): out of range", h, s, r)
			}
		}
		var hc HostClock
		a := hc.Read(200, h, now, now, now)
		if a.Pause < 0 || a.Pause > maxQuotaDelay {
			t.Errorf("HostClock.Read(%v): pause %v out of range", h, a.Pause)
		}
	})
}

// TestHostClockResetsRefuted: a host whose answers name a minute's end as their reset while its
// quota is a bucket of one (a token back every 100 ms) is refused twice with a spent quota; once
// it has accepted a request sent a minute before the reset its spent answers named, a spent
// answer pauses one interval, not until the reset. A fixed window's request resumed within the
// second its reset was rounded by, and accepted, refutes nothing.
func TestHostClockResetsRefuted(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	end := t0.Add(time.Minute)
	x := func(status, r int, at time.Time, retryAfter string) (int, http.Header, time.Time) {
		h := http.Header{"X-Ratelimit-Limit": {"600"}, "X-Ratelimit-Remaining": {strconv.Itoa(r)},
			"X-Ratelimit-Reset": {strconv.FormatInt(end.Unix(), 10)}}
		if retryAfter != "" {
			h.Set("Retry-After", retryAfter)
		}
		return status, h, at
	}
	var h HostClock
	read := func(status int, hd http.Header, at time.Time) Answer { return h.Read(status, hd, at, at, at) }
	ms := time.Millisecond
	if a := read(x(200, 0, t0, "")); a.Pause != 100*ms {
		t.Fatalf("first spent answer: pause %v, want one interval (100ms)", a.Pause)
	}
	read(x(429, 0, t0.Add(100*ms), "1"))
	if a := read(x(429, 0, t0.Add(1100*ms), "1")); a.Pause < 50*time.Second {
		t.Fatalf("second refusal with a spent quota: pause %v, want the reset (about 59 s)", a.Pause)
	}
	// The host accepts a request sent 2.1 s in: its quota came back 58 s before the reset.
	if a := read(x(200, 0, t0.Add(2100*ms), "")); a.Pause != 100*ms {
		t.Errorf("spent answer after the reset was refuted: pause %v, want one interval (100ms)", a.Pause)
	}
	if a := read(x(429, 0, t0.Add(2200*ms), "1")); a.Pause != time.Second {
		t.Errorf("refusal after the reset was refuted: pause %v, want its Retry-After (1s)", a.Pause)
	}

	// A fixed window of 200 per 10 s, spent: its reset is waited for, and a request resumed
	// within the rounding of the reset that is accepted leaves the resets trusted.
	var w HostClock
	ietf := func(r, secs int) http.Header {
		return http.Header{"Ratelimit-Policy": {`"default";q=200;w=10`}, "Ratelimit": {`"default";r=` + strconv.Itoa(r) + `;t=` + strconv.Itoa(secs)}}
	}
	w.Read(200, ietf(199, 10), t0, t0, t0)
	w.Read(200, ietf(0, 8), t0.Add(2*time.Second), t0.Add(2*time.Second), t0.Add(2*time.Second))
	at := t0.Add(9 * time.Second) // a second before the reset the spent answer named
	w.Read(200, ietf(199, 10), at, at, at)
	at = t0.Add(12 * time.Second) // the window spent again, after the reset
	if a := w.Read(200, ietf(0, 7), at, at, at); a.Pause < 6*time.Second {
		t.Errorf("fixed window spent after an early resume: pause %v, want its reset (about 7 s)", a.Pause)
	}
}

// TestHostClockResetsRefutedByRespent: a host refused twice with a spent quota before any
// answer could refute its resets is waited for until the reset; the first request after it,
// when the quota of 600 is whole again, is answered with none left: the reset did not bring the
// quota back, and the next spent answer pauses one interval.
func TestHostClockResetsRefutedByRespent(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	x := func(r int, end time.Time) http.Header {
		return http.Header{"X-Ratelimit-Limit": {"600"}, "X-Ratelimit-Remaining": {strconv.Itoa(r)},
			"X-Ratelimit-Reset": {strconv.FormatInt(end.Unix(), 10)}, "Retry-After": {"1"}}
	}
	var h HostClock
	end := t0.Add(time.Minute)
	h.Read(429, x(0, end), t0, t0, t0)
	at := t0.Add(time.Second)
	if a := h.Read(429, x(0, end), at, at, at); a.Pause < 50*time.Second {
		t.Fatalf("second refusal with a spent quota: pause %v, want the reset (59 s)", a.Pause)
	}
	at = end.Add(10 * time.Millisecond)
	if a := h.Read(200, x(0, end.Add(time.Minute)), at, at, at); a.Pause != 100*time.Millisecond {
		t.Errorf("one request spent the quota the reset brought back: pause %v, want one interval (100ms)", a.Pause)
	}
}
