package crawler

import (
	"testing"
	"time"

	"github.com/crawl-project/crawl/aimd"
	"github.com/crawl-project/crawl/frontier"
	"github.com/crawl-project/crawl/internal/retry"
)

func TestClassifyForbidden(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	type answer struct {
		at       time.Duration
		status   int
		attempts int
		want     retry.Class
	}
	final403 := retry.ClassifyStatus(403)
	retried := func(sig aimd.Signal) retry.Class {
		return retry.Class{Retryable: true, Signal: sig, Reason: "status-403"}
	}
	tests := []struct {
		name    string
		answers []answer
	}{
		{"a host that has served nothing: 403 is final", []answer{
			{0, 403, 0, final403}, {time.Second, 403, 0, final403},
		}},
		{"after a 2xx: the first 403 is retried without a signal, the next ones back off", []answer{
			{0, 200, 0, retry.ClassifyStatus(200)},
			{time.Second, 403, 0, retried(aimd.Neutral)},
			{2 * time.Second, 403, 0, retried(aimd.Overload)},
			{3 * time.Second, 403, 1, retried(aimd.Overload)},
			{4 * time.Second, 403, forbiddenRetries, retry.Class{Signal: aimd.Overload, Reason: "status-403"}}, // out of retries: stored
		}},
		{"a 2xx ends the run", []answer{
			{0, 200, 0, retry.ClassifyStatus(200)},
			{time.Second, 403, 0, retried(aimd.Neutral)},
			{2 * time.Second, 204, 0, retry.ClassifyStatus(204)},
			{3 * time.Second, 403, 0, retried(aimd.Neutral)},
		}},
		{"a 404 or a redirect ends the run too, a 429 or a 5xx does not", []answer{
			{0, 200, 0, retry.ClassifyStatus(200)},
			{time.Second, 403, 0, retried(aimd.Neutral)},
			{2 * time.Second, 404, 0, retry.ClassifyStatus(404)},
			{3 * time.Second, 403, 0, retried(aimd.Neutral)},
			{4 * time.Second, 301, 0, retry.ClassifyStatus(301)},
			{5 * time.Second, 403, 0, retried(aimd.Neutral)},
			{6 * time.Second, 503, 0, retry.ClassifyStatus(503)},
			{7 * time.Second, 403, 0, retried(aimd.Overload)},
		}},
		{"a run that outlasts forbiddenBlockTime is taken at its word", []answer{
			{0, 200, 0, retry.ClassifyStatus(200)},
			{time.Second, 403, 0, retried(aimd.Neutral)},
			{2 * time.Second, 403, 0, retried(aimd.Overload)},
			{time.Second + forbiddenBlockTime, 403, 0, final403},
			{2 * forbiddenBlockTime, 403, 0, final403},
		}},
		{"other statuses pass through", []answer{
			{0, 200, 0, retry.ClassifyStatus(200)},
			{time.Second, 404, 0, retry.ClassifyStatus(404)},
			{2 * time.Second, 429, 0, retry.ClassifyStatus(429)},
			{3 * time.Second, 401, 0, retry.ClassifyStatus(401)},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := &Crawler{hostTable: hostTable{hosts: map[string]*hostRecord{}}}
			for i, a := range tc.answers {
				got := c.classifyForbidden("h", a.status, a.attempts, t0.Add(a.at), retry.ClassifyStatus(a.status))
				if got != a.want {
					t.Errorf("answer %d (%d at +%v, %d attempts): %+v, want %+v", i+1, a.status, a.at, a.attempts, got, a.want)
				}
			}
		})
	}
}

func TestPageFault(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := &Crawler{hostTable: hostTable{hosts: map[string]*hostRecord{}}}
	bad := retry.ClassifyStatus(502)
	lease := func(attempts int) frontier.Lease {
		return frontier.Lease{Entry: frontier.Entry{URL: "http://h/b", Host: "h"}, Attempts: attempts}
	}
	if got := c.pageFault(lease(1), bad, t0); got.Signal != aimd.Failure {
		t.Errorf("a retry's 502 from a host that has answered nothing: %v, want Failure", got.Signal)
	}
	c.classifyForbidden("h", 200, 0, t0, retry.ClassifyStatus(200)) // the host serves a page
	if got := c.pageFault(lease(0), bad, t0.Add(time.Second)); got.Signal != aimd.Failure {
		t.Errorf("a first try's 502: %v, want Failure (the controller judges whether it is isolated)", got.Signal)
	}
	if got := c.pageFault(lease(1), bad, t0.Add(time.Second)); got != (retry.Class{Retryable: true, Signal: aimd.Neutral, Reason: bad.Reason}) {
		t.Errorf("a retry's 502 while the host serves: %+v, want retried and Neutral", got)
	}
	if got := c.pageFault(lease(1), retry.ClassifyStatus(503), t0.Add(time.Second)); got.Signal != aimd.Overload {
		t.Errorf("a retry's 503: %v, want Overload (slow down is the host's word)", got.Signal)
	}
	if got := c.pageFault(lease(1), bad, t0.Add(servingWindow+time.Second)); got.Signal != aimd.Failure {
		t.Errorf("a retry's 502 a minute after the host last answered: %v, want Failure", got.Signal)
	}
}

func TestServingOutlivesTheHostRecord(t *testing.T) {
	// A host that answered its robots.txt and then refuses a URL with "slow down" (a second
	// name of a server that another name keeps busy) is serving even when its record left
	// memory between the URL's retries: the URL gets the throttled attempts, not the plain ones.
	c := openSeeded(t, "http://127.0.0.2:9/")
	now := time.Now()
	c.answeredRobots("second.test", now)
	c.mu.Lock()
	c.hosts["second.test"].used = now.Add(-hostIdle)
	c.mu.Unlock()
	c.dropIdleHosts(now.Add(time.Second))
	if c.warm("second.test") {
		t.Fatal("the host's record was kept; the test needs it dropped")
	}
	lease := frontier.Lease{Entry: frontier.Entry{URL: "http://second.test/", Host: "second.test"}, Attempts: c.cfg.MaxAttempts - 1}
	refused := retry.ClassifyStatus(503)
	if res := c.retryOrFail(lease, refused, "503", 503, 0, now.Add(10*time.Second)); res.Kind != frontier.Retry {
		t.Fatalf("attempt %d refused 10 s after robots.txt was answered: %v (%s), want a retry", lease.Attempts+1, res.Kind, res.Detail)
	}
	c.dropIdleHosts(now.Add(servingWindow))
	if res := c.retryOrFail(lease, refused, "503", 503, 0, now.Add(servingWindow+time.Second)); res.Kind != frontier.Failed {
		t.Fatalf("attempt %d refused a minute after the last answer: %v, want failed", lease.Attempts+1, res.Kind)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.answers) != 0 {
		t.Errorf("answers older than servingWindow still held: %v", c.answers)
	}
}

func TestBanReadingOutlivesTheHostRecord(t *testing.T) {
	// A host that served a page and then bans (403 to everything) sits idle between the
	// spaced-out retries long enough for its record to be dropped: its 403s are still read as
	// a ban, until the run outlasts forbiddenBlockTime and nothing recent is left to read.
	c := openSeeded(t, "http://127.0.0.2:9/")
	now := time.Now()
	idle := func(at time.Time) {
		t.Helper()
		c.mu.Lock()
		if r := c.hosts["ban.test"]; r != nil {
			r.used = at.Add(-hostIdle)
		}
		c.mu.Unlock()
		c.dropIdleHosts(at)
		if c.warm("ban.test") {
			t.Fatal("the host's record was kept; the test needs it dropped")
		}
	}
	c.setLastErr("ban.test", "") // makes the record
	c.classifyForbidden("ban.test", 200, 0, now, retry.ClassifyStatus(200))
	idle(now.Add(5 * time.Second))
	if got := c.classifyForbidden("ban.test", 403, 0, now.Add(5*time.Second), retry.ClassifyStatus(403)); !got.Retryable || got.Signal != aimd.Neutral {
		t.Errorf("the first 403 after the record was dropped: %+v, want retried and Neutral", got)
	}
	idle(now.Add(50 * time.Second))
	if got := c.classifyForbidden("ban.test", 403, 1, now.Add(50*time.Second), retry.ClassifyStatus(403)); !got.Retryable || got.Signal != aimd.Overload {
		t.Errorf("the second 403, after the record was dropped again: %+v, want retried and Overload", got)
	}
	// The page 2xx is 70 s old and the run 65 s: nothing left to read, and memory is freed.
	c.mu.Lock()
	c.forgetAnswers(now.Add(70 * time.Second))
	n := len(c.answers)
	c.mu.Unlock()
	if n != 0 {
		t.Errorf("%d hosts' answers kept after their run outlasted forbiddenBlockTime, want none", n)
	}
	if got := c.classifyForbidden("ban.test", 403, 0, now.Add(70*time.Second), retry.ClassifyStatus(403)); got != retry.ClassifyStatus(403) {
		t.Errorf("a 403 once the answers were dropped: %+v, want final", got)
	}
}
