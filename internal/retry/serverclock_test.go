package retry

import (
	"math/rand"
	"net/http"
	"testing"
	"time"
)

// response is one response of a host whose clock is ahead of ours by skew: generated at
// server time at, received lat later, with the Date header such a server sends.
func response(at time.Time, skew, lat time.Duration) (date string, received time.Time) {
	return at.UTC().Format(http.TimeFormat), at.Add(-skew).Add(lat)
}

func TestServerClockZeroValueIsOurClock(t *testing.T) {
	var c ServerClock
	now := time.Date(2025, 3, 4, 12, 0, 0, 0, time.UTC)
	if got := c.Now(now); !got.Equal(now) {
		t.Fatalf("Now = %v, want %v", got, now)
	}
	c.Observe("yesterday", now)
	c.Observe("", now)
	if got := c.Now(now); !got.Equal(now) {
		t.Fatalf("after invalid Dates, Now = %v, want %v", got, now)
	}
}

// TestServerClockBound: whatever the skew, fractions and latencies, Now never runs ahead of the
// host's clock (a named time is never reached early), one response gives what its Date says,
// and many responses at different fractions of a second bring Now within tens of ms of it.
func TestServerClockBound(t *testing.T) {
	for seed := int64(1); seed <= 20; seed++ {
		rnd := rand.New(rand.NewSource(seed))
		skew := time.Duration(rnd.Int63n(int64(20*time.Second))) - 10*time.Second
		at := time.Date(2025, 3, 4, 12, 0, 0, 0, time.UTC).Add(time.Duration(rnd.Int63n(int64(time.Second))))
		var c ServerClock
		for i := range 200 {
			at = at.Add(time.Duration(rnd.Int63n(int64(300 * time.Millisecond))))
			lat := time.Duration(rnd.Int63n(int64(5 * time.Millisecond)))
			date, received := response(at, skew, lat)
			c.Observe(date, received)
			host := received.Add(skew) // the host's clock when we received it
			got := c.Now(received)
			if got.After(host) {
				t.Fatalf("seed %d, response %d: Now %v is ahead of the host's clock %v (skew %v)", seed, i, got, host, skew)
			}
			if i == 0 {
				if want := ServerNow(date, received); !got.Equal(want) {
					t.Fatalf("seed %d: after one response Now = %v, want its Date %v", seed, got, want)
				}
			}
			if i == 199 && host.Sub(got) > 50*time.Millisecond {
				t.Errorf("seed %d: after 200 responses Now is %v behind the host's clock, want ≤ 50ms", seed, host.Sub(got))
			}
		}
	}
}

// TestServerClockFollowsChanges: a clock stepped back is followed at the next response; one
// that drifts back slowly is followed within two generations of observations.
func TestServerClockFollowsChanges(t *testing.T) {
	at := time.Date(2025, 3, 4, 12, 0, 0, 300e6, time.UTC)
	var c ServerClock
	for range 100 {
		at = at.Add(137 * time.Millisecond)
		c.Observe(response(at, 10*time.Second, time.Millisecond))
	}
	// Stepped back by ten seconds: the host's clock now equals ours.
	at = at.Add(-10 * time.Second)
	date, received := response(at.Add(137*time.Millisecond), 0, time.Millisecond)
	c.Observe(date, received)
	if got := c.Now(received); got.After(received) {
		t.Fatalf("after a step back Now is %v ahead of the host's clock", got.Sub(received))
	}
	// Drifting back 1 ms a response: the bound lags by at most two generations' drift.
	skew := time.Duration(0)
	for i := range 1000 {
		at, skew = at.Add(137*time.Millisecond), skew-time.Millisecond
		date, received := response(at, skew, time.Millisecond)
		c.Observe(date, received)
		if ahead := c.Now(received).Sub(received.Add(skew)); ahead > 2*clockGeneration*time.Millisecond {
			t.Fatalf("response %d: Now is %v ahead of a clock drifting back 1ms a response", i, ahead)
		}
	}
}

// FuzzServerClock: whatever Date headers come, and in whatever order, Now after a response is
// never earlier than that response's own Date says (the clock only tightens ServerNow's
// reference) unless that Date is garbage (a year or more off), and Now is our clock while no
// Date was valid.
func FuzzServerClock(f *testing.F) {
	f.Add("Tue, 04 Mar 2025 12:00:07 GMT", int64(0), "Tue, 04 Mar 2025 12:00:09 GMT", int64(1500))
	f.Add("garbage", int64(10), "Mon, 03 Mar 2025 12:00:00 GMT", int64(-5000))
	f.Fuzz(func(t *testing.T, d1 string, ms1 int64, d2 string, ms2 int64) {
		base := time.Date(2025, 3, 4, 12, 0, 0, 0, time.UTC)
		var c ServerClock
		valid := false
		for _, o := range []struct {
			date string
			ms   int64
		}{{d1, ms1 % 1e9}, {d2, ms2 % 1e9}} {
			r := base.Add(time.Duration(o.ms) * time.Millisecond)
			c.Observe(o.date, r)
			if d, ok := parseDate(o.date); ok && d.Sub(r).Abs() <= maxQuotaDelay { // a Date as the clock reads it
				valid = true
				if got, one := c.Now(r), ServerNow(o.date, r); got.Before(one) {
					t.Fatalf("Now %v is before this response's Date %v", got, one)
				}
			}
			if !valid && !c.Now(r).Equal(r) {
				t.Fatalf("no valid Date yet, but Now %v is not our clock %v", c.Now(r), r)
			}
		}
	})
}
