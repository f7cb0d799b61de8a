package simweb

import (
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"
)

// TestHammerFrozenClock sends six requests at one instant to a host with burst 2, for every
// reply style, then one at the announced deadline.
func TestHammerFrozenClock(t *testing.T) {
	tests := []struct {
		style      ReplyStyle
		status     int
		retryAfter string    // header on the 429/503, "" for none
		deadline   time.Time // when the client may come back
		inRA       int       // requests 4-6 arrive inside the window
	}{
		{Reply429Seconds, 429, "1", t0.Add(time.Second), 3},
		{Reply429Date, 429, "Wed, 01 Jan 2025 12:00:01 GMT", time.Date(2025, 1, 1, 12, 0, 1, 0, time.UTC), 3},
		{Reply429Bare, 429, "", t0.Add(time.Second), 0},
		{Reply503RetryAfter, 503, "1", t0.Add(time.Second), 3},
	}
	for _, tc := range tests {
		t.Run(tc.style.String(), func(t *testing.T) {
			clk := newFakeClock(t0, 0)
			w, c := startWeb(t, []HostSpec{{Name: "h", Pages: 3, Limit: 2, Burst: 2, Reply: tc.style}},
				&Options{Clock: clk.Now})
			root := w.URL("h")
			for i := range 6 {
				r := get(t, c, root)
				want := http.StatusOK
				if i >= 2 {
					want = tc.status
				}
				if r.status != want {
					t.Fatalf("request %d: status %d, want %d", i+1, r.status, want)
				}
				if got := r.header.Get("Date"); got != "Wed, 01 Jan 2025 12:00:00 GMT" {
					t.Errorf("Date = %q, want the fake clock's", got)
				}
				if i >= 2 && r.header.Get("Retry-After") != tc.retryAfter {
					t.Errorf("request %d: Retry-After = %q, want %q", i+1, r.header.Get("Retry-After"), tc.retryAfter)
				}
			}
			clk.Set(tc.deadline) // arriving exactly at the deadline is polite, and a token is there
			if r := get(t, c, root); r.status != http.StatusOK {
				t.Fatalf("at the deadline: status %d, want 200", r.status)
			}
			st := w.Stats()["h"]
			if st.OK != 3 || st.OverLimit != 4 || st.InRetryAfter != tc.inRA || st.Requests != 7 {
				t.Errorf("OK/OverLimit/InRetryAfter/Requests = %d/%d/%d/%d, want 3/4/%d/7",
					st.OK, st.OverLimit, st.InRetryAfter, st.Requests, tc.inRA)
			}
			if st.Duplicates != 2 || st.Fetched[root] != 3 || st.BeforeRobots != 7 {
				t.Errorf("Duplicates %d, Fetched[/] %d, BeforeRobots %d; want 2, 3, 7",
					st.Duplicates, st.Fetched[root], st.BeforeRobots)
			}
			if !st.FirstRequest.Equal(t0) || !st.LastRequest.Equal(tc.deadline) {
				t.Errorf("First/LastRequest = %v/%v", st.FirstRequest, st.LastRequest)
			}
		})
	}
}

// TestRetryAfterRounding checks the announced wait is the time to the next token, rounded up.
func TestRetryAfterRounding(t *testing.T) {
	tests := []struct {
		name    string
		limit   float64
		elapsed time.Duration // since the burst was spent
		want    string
	}{
		{"4s per token, none elapsed", 0.25, 0, "4"},
		{"4s per token, 1.5s elapsed", 0.25, 1500 * time.Millisecond, "3"},
		{"4s per token, 3.9s elapsed", 0.25, 3900 * time.Millisecond, "1"},
		{"10 per second", 10, 0, "1"},
		{"0.4 per second", 0.4, 0, "3"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := newFakeClock(t0, 0)
			w, c := startWeb(t, []HostSpec{{Name: "h", Pages: 1, Limit: tc.limit}}, &Options{Clock: clk.Now})
			if r := get(t, c, w.URL("h")); r.status != 200 {
				t.Fatalf("first request: %d", r.status)
			}
			clk.Advance(tc.elapsed)
			r := get(t, c, w.URL("h"))
			if r.status != 429 || r.header.Get("Retry-After") != tc.want {
				t.Errorf("status %d Retry-After %q, want 429 %q", r.status, r.header.Get("Retry-After"), tc.want)
			}
		})
	}
}

// TestPoliteClientScoresZero fetches every expected page with a client that waits exactly what
// each refusal announced: it must never be counted in a Retry-After window and must never be
// refused twice in a row.
func TestPoliteClientScoresZero(t *testing.T) {
	for _, style := range []ReplyStyle{Reply429Seconds, Reply429Date, Reply503RetryAfter} {
		t.Run(style.String(), func(t *testing.T) {
			clk := newFakeClock(t0, 0)
			w, c := startWeb(t, []HostSpec{{Name: "h", Pages: 12, Limit: 3, Burst: 2, Reply: style, BanAfter: 1}},
				&Options{Clock: clk.Now})
			urls := append([]string{w.URL("h") + "robots.txt"}, w.Expected()["h"]...)
			refused := 0
			for _, u := range urls {
				for attempt := 0; ; attempt++ {
					r := get(t, c, u)
					if r.status == http.StatusOK {
						break
					}
					if attempt > 0 {
						t.Fatalf("%s refused again after waiting as told", u)
					}
					refused++
					clk.Advance(announcedWait(t, r))
				}
				clk.Advance(100 * time.Millisecond) // some pacing, below the limit
			}
			st := w.Stats()["h"]
			if st.InRetryAfter != 0 || st.Banned || st.Duplicates != 0 || st.BeforeRobots != 0 {
				t.Errorf("polite client scored %+v", st)
			}
			if refused == 0 || st.OverLimit != refused || len(st.Fetched) != 12 {
				t.Errorf("refused %d, OverLimit %d, fetched %d; want >0, equal, 12", refused, st.OverLimit, len(st.Fetched))
			}
		})
	}
}

// announcedWait reads Retry-After as seconds, or as an HTTP-date relative to the Date header.
func announcedWait(t *testing.T, r reply) time.Duration {
	t.Helper()
	ra := r.header.Get("Retry-After")
	if n, err := strconv.Atoi(ra); err == nil {
		return time.Duration(n) * time.Second
	}
	at, err1 := http.ParseTime(ra)
	date, err2 := http.ParseTime(r.header.Get("Date"))
	if err1 != nil || err2 != nil {
		t.Fatalf("Retry-After %q / Date %q unparsable", ra, r.header.Get("Date"))
	}
	return at.Sub(date)
}

func TestBan(t *testing.T) {
	tests := []struct {
		style ReplyStyle
		codes []int // statuses for requests at one frozen instant
	}{
		// Announcing: request 2 is refused and announces; 3-6 are strikes 1-4; 4 > 3 bans.
		{Reply429Seconds, []int{200, 429, 429, 429, 429, 429, 403, 403}},
		// Bare: every refusal is a strike; the 4th (request 5) bans.
		{Reply429Bare, []int{200, 429, 429, 429, 429, 403, 403, 403}},
	}
	for _, tc := range tests {
		t.Run(tc.style.String(), func(t *testing.T) {
			clk := newFakeClock(t0, 0)
			w, c := startWeb(t, []HostSpec{{Name: "h", Pages: 2, Limit: 1, Reply: tc.style, BanAfter: 3}},
				&Options{Clock: clk.Now})
			for i, want := range tc.codes {
				if r := get(t, c, w.URL("h")); r.status != want {
					t.Fatalf("request %d: status %d, want %d", i+1, r.status, want)
				}
			}
			clk.Advance(time.Hour)
			if r := get(t, c, w.URL("h")+"robots.txt"); r.status != http.StatusForbidden {
				t.Errorf("an hour later: status %d, want 403 (bans stick)", r.status)
			}
			st := w.Stats()["h"]
			banned := 0
			for _, code := range tc.codes {
				if code == 403 {
					banned++
				}
			}
			if !st.Banned || st.BannedRequests != banned+1 {
				t.Errorf("Banned %v BannedRequests %d, want true %d", st.Banned, st.BannedRequests, banned+1)
			}
			w.Reset()
			if r := get(t, c, w.URL("h")); r.status != http.StatusOK {
				t.Errorf("after Reset: status %d, want 200", r.status)
			}
			if st := w.Stats()["h"]; st.Banned || st.Requests != 1 || st.OK != 1 || len(st.Fetched) != 1 {
				t.Errorf("after Reset: %+v", st)
			}
		})
	}
}

// TestLimitDrop divides a 10 req/s limit by 4 one second after the first request.
func TestLimitDrop(t *testing.T) {
	clk := newFakeClock(t0, 0)
	w, c := startWeb(t, []HostSpec{{Name: "h", Pages: 1, Limit: 10,
		LimitDrop: &LimitChange{After: time.Second, Factor: 0.25}}}, &Options{Clock: clk.Now})
	steps := []struct {
		at   time.Duration // since t0
		want int
	}{
		{0, 200},
		{100 * time.Millisecond, 200}, // 10/s: a token every 100 ms
		{200 * time.Millisecond, 200},
		{1000 * time.Millisecond, 200}, // the drop happens here; the bucket was full
		{1100 * time.Millisecond, 429}, // 2.5/s: 0.25 token after 100 ms
		{1500 * time.Millisecond, 200}, // over 1 token after 500 ms
	}
	for _, s := range steps {
		clk.Set(t0.Add(s.at))
		if r := get(t, c, w.URL("h")); r.status != s.want {
			t.Errorf("at +%v: status %d, want %d", s.at, r.status, s.want)
		}
	}
}

// TestHammerRealClock hits a 5 req/s host with 40 concurrent plain requests.
func TestHammerRealClock(t *testing.T) {
	w, c := startWeb(t, []HostSpec{{Name: "h", Pages: 5, Limit: 5, Burst: 1}}, nil)
	var wg sync.WaitGroup
	for range 40 {
		wg.Go(func() {
			resp, err := c.Get(w.URL("h") + "p1")
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
		})
	}
	wg.Wait()
	st := w.Stats()["h"]
	if st.Requests != 40 || st.OK+st.OverLimit != 40 || st.OK < 1 || st.OverLimit < 30 || st.InRetryAfter < 1 {
		t.Errorf("hammering scored %+v", st)
	}
	if st.Duplicates != st.OK-1 {
		t.Errorf("Duplicates %d, want OK-1 = %d", st.Duplicates, st.OK-1)
	}
}

// TestWorkersQueue sends four requests at once to one worker with 50 ms service time.
func TestWorkersQueue(t *testing.T) {
	const service = 50 * time.Millisecond
	w, c := startWeb(t, []HostSpec{{Name: "h", Pages: 4, Workers: 1, Service: service}}, nil)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			resp, err := c.Get(w.URL("h") + pagePath(i)[1:])
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Errorf("status %d", resp.StatusCode)
			}
		})
	}
	wg.Wait()
	st := w.Stats()["h"]
	// Every request holds the slot for the service time, and with one slot a request that
	// arrives while another is served waits for it: the slowest takes at least two (up to four).
	if st.LatencyP50 < service || st.LatencyP95 < 2*service || st.OK != 4 {
		t.Errorf("P50 %v P95 %v OK %d, want >= %v, >= %v, 4", st.LatencyP50, st.LatencyP95, st.OK, service, 2*service)
	}
	if st.PeakInFlight < 2 || st.OverLimit != 0 {
		t.Errorf("PeakInFlight %d OverLimit %d, want queueing and no refusals", st.PeakInFlight, st.OverLimit)
	}
}

func TestPercentile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var out []time.Duration
		for _, x := range v {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	tests := []struct {
		in     []time.Duration
		p      int
		wantMs int
	}{
		{nil, 50, 0},
		{ms(7), 95, 7},
		{ms(1, 2, 3, 4), 50, 2},
		{ms(1, 2, 3, 4), 95, 4},
		{ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 50, 5},
		{ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 95, 10},
	}
	for _, tc := range tests {
		if got := percentile(tc.in, tc.p); got != time.Duration(tc.wantMs)*time.Millisecond {
			t.Errorf("percentile(%v, %d) = %v, want %dms", tc.in, tc.p, got, tc.wantMs)
		}
	}
}

// TestGrace forgives requests already in flight when a window opened, and nothing else.
func TestGrace(t *testing.T) {
	clk := newFakeClock(t0, 0)
	w, c := startWeb(t, []HostSpec{{Name: "h", Pages: 1, Limit: 1, BanAfter: 2}},
		&Options{Clock: clk.Now, Grace: 50 * time.Millisecond})
	steps := []struct {
		at     time.Duration
		status int
		inRA   int // InRetryAfter after this request
	}{
		{0, 200, 0},
		{0, 429, 0},                       // opens the window (deadline +1s)
		{10 * time.Millisecond, 429, 0},   // in flight when the window opened: forgiven
		{49 * time.Millisecond, 429, 0},   // still within grace
		{60 * time.Millisecond, 429, 1},   // past grace: counted, and opens nothing
		{70 * time.Millisecond, 429, 2},   // not forgiven although 10ms after a refusal
		{80 * time.Millisecond, 429, 3},   // third strike > BanAfter 2: banned from now on
		{2000 * time.Millisecond, 403, 3}, // banned
	}
	for i, s := range steps {
		clk.Set(t0.Add(s.at))
		r := get(t, c, w.URL("h"))
		if st := w.Stats()["h"]; r.status != s.status || st.InRetryAfter != s.inRA {
			t.Errorf("step %d (+%v): status %d InRetryAfter %d, want %d %d", i, s.at, r.status, st.InRetryAfter, s.status, s.inRA)
		}
	}
}

// TestEvasiveBlock: more than Evasive requests within EvasiveWindow block the client (403 to
// everything, robots.txt included) until EvasiveBlock passes with no request; a request during
// the block starts it again.
func TestEvasiveBlock(t *testing.T) {
	clk := newFakeClock(t0, 0)
	w, c := startWeb(t, []HostSpec{{Name: "h", Pages: 3, Evasive: 3, EvasiveWindow: time.Second, EvasiveBlock: 2 * time.Second}},
		&Options{Clock: clk.Now})
	root := w.URL("h")
	steps := []struct {
		at     time.Duration // since t0
		path   string
		status int
	}{
		{0, "", 200}, {0, "", 200}, {0, "", 200},
		{0, "", 403},                       // the fourth within a second: blocked until +2s
		{1500 * time.Millisecond, "", 403}, // during the block: it now lasts until +3.5s
		{3400 * time.Millisecond, "robots.txt", 403},
		{5500 * time.Millisecond, "", 200}, // two seconds without a request: free again
	}
	for i, st := range steps {
		clk.Set(t0.Add(st.at))
		if r := get(t, c, root+st.path); r.status != st.status {
			t.Fatalf("request %d at +%v: status %d, want %d", i+1, st.at, r.status, st.status)
		}
	}
	if got := w.Stats()["h"]; got.Blocked != 3 || got.OK != 4 {
		t.Errorf("Blocked %d OK %d, want 3 and 4", got.Blocked, got.OK)
	}
}
