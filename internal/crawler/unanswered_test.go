package crawler

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crawl-project/crawl/frontier"
	"github.com/crawl-project/crawl/internal/retry"
	"github.com/crawl-project/crawl/storage"
)

// TestUnansweredHostGivenUp: a host whose pages drip a byte a second (or never answer) past
// --timeout, with 100 URLs queued at --max-attempts 2, is given up after at most
// retry.UnansweredLimit × --host-concurrency requests instead of 200: the crawl ends by
// itself, every one of its URLs failed `timeout`, an ordinary host beside it crawled in full.
// `--retry failed` queues them again, and once the host answers they are fetched.
func TestUnansweredHostGivenUp(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs crawls against a host that does not answer")
	}
	const links = 100
	for _, tc := range []struct {
		name  string
		drip  handler
		again bool // run again with --retry failed once the host answers
	}{
		{"drips headers", slowHeaders, true},
		{"drips the body", slowBody, false},
		{"accepts and never answers", silent, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			done := make(chan struct{})
			var hits atomic.Int64 // requests for the host's pages
			var answers atomic.Bool
			drip := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch {
				case r.URL.Path == "/robots.txt":
					http.NotFound(w, r)
				case answers.Load():
					leaf(done, w, r)
				default:
					hits.Add(1)
					tc.drip(done, w, r)
				}
			}))
			ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/" {
					leaf(done, w, r)
					return
				}
				w.Header().Set("Content-Type", "text/html")
				for i := range 20 {
					fmt.Fprintf(w, `<a href="/o/%d">%d</a> `, i, i)
				}
			}))
			var closeOnce sync.Once
			stop := func() {
				closeOnce.Do(func() {
					close(done)
					drip.Close()
					ok.Close()
				})
			}
			t.Cleanup(stop)

			cfg := Defaults()
			cfg.Dir = t.TempDir()
			cfg.Workers, cfg.HostConcurrency = 8, 4
			cfg.InitialRate, cfg.MinRate = 20, 5
			cfg.Timeout = 300 * time.Millisecond
			cfg.Retry, cfg.MaxAttempts = Backoff{Base: 50 * time.Millisecond, Cap: time.Second}, 2
			cfg.StatusEvery, cfg.Grace = 100*time.Millisecond, time.Second
			cfg.Seeds = []string{ok.URL + "/"}
			for i := range links {
				cfg.Seeds = append(cfg.Seeds, fmt.Sprintf("%s/p/%d", drip.URL, i))
			}
			run := func(cfg Config) *Summary {
				t.Helper()
				sum := runToEnd(t, cfg)
				if sum.StopReason != "done" || sum.Queued != 0 {
					t.Fatalf("stopped %q with %d queued, want done with none", sum.StopReason, sum.Queued)
				}
				return sum
			}

			sum := run(cfg)
			limit := retry.UnansweredLimit * cfg.HostConcurrency
			t.Logf("%v: %d requests to the host that does not answer (at most %d), failed %v",
				sum.Elapsed.Round(time.Millisecond), hits.Load(), limit, sum.FailedBy)
			if n := hits.Load(); n > int64(limit) {
				t.Errorf("the host that does not answer got %d requests for its %d URLs, want at most %d (retry.UnansweredLimit × --host-concurrency)",
					n, links, limit)
			}
			unrequested := 0
			states(t, cfg.Dir, func(u string, st frontier.URLState) {
				switch {
				case strings.HasPrefix(u, ok.URL):
					if st.State != "fetched" {
						t.Errorf("%s: %s %q (%s), want fetched", u, st.State, st.Reason, st.Detail)
					}
				case st.State != "failed" || st.Reason != "timeout":
					t.Errorf("%s: %s %q (%s), want failed timeout", u, st.State, st.Reason, st.Detail)
				case strings.HasPrefix(st.Detail, "not requested"):
					unrequested++
				}
			})
			if unrequested == 0 {
				t.Error("no URL failed unrequested for the host given up")
			}
			if !tc.again {
				return
			}
			answers.Store(true)
			again := cfg
			again.Seeds, again.RetryFailed = nil, true
			sum = run(again)
			if sum.Fetched != 1+20+links || sum.Failed != 0 {
				t.Errorf("after --retry failed with the host answering: %d fetched, %d failed; want %d, 0", sum.Fetched, sum.Failed, 1+20+links)
			}
		})
	}
}

// states calls fn with every URL of the store in dir and its state.
func states(t *testing.T, dir string, fn func(string, frontier.URLState)) {
	t.Helper()
	db, err := storage.Open(dir, &storage.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	fr, err := frontier.Open(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := fr.Check(); err != nil {
		t.Errorf("store inconsistent: %v", err)
	}
	if err := fr.Walk(func(r frontier.URLRecord) error {
		fn(r.URL, r.URLState)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestUnansweredOutlivesTheHostRecord: a host paced so slowly that its record leaves memory
// between its requests (hostIdle) keeps its count of unanswered requests, and is given up at
// the retry.UnansweredLimit-th; an answer takes it back. A host's run not extended for
// retry.UnansweredMemory is forgotten; a host given up is not.
func TestUnansweredOutlivesTheHostRecord(t *testing.T) {
	c := openSeeded(t, "http://127.0.0.2:9/")
	now := time.Now()
	at := now
	for i := range retry.UnansweredLimit {
		c.setLastErr("slow.test", "") // a request makes the record
		c.mu.Lock()
		c.hosts["slow.test"].used = at.Add(-hostIdle)
		c.mu.Unlock()
		c.dropIdleHosts(at)
		if c.warm("slow.test") {
			t.Fatal("the host's record was kept; the test needs it dropped")
		}
		given, _ := c.unanswered("slow.test", fmt.Sprintf("http://slow.test/%d", i), at, at.Add(c.cfg.Timeout), "timeout", "timeout: request timeout exceeded")
		if want := i == retry.UnansweredLimit-1; given != want {
			t.Fatalf("request %d unanswered: given up %v, want %v", i+1, given, want)
		}
		at = at.Add(c.cfg.Timeout + 10*time.Second)
	}
	c.unanswered("other.test", "http://other.test/", now, now.Add(time.Second), "timeout", "")
	c.dropIdleHosts(at.Add(retry.UnansweredMemory))
	if given, reason, _ := c.givenUp("slow.test"); !given || reason != "timeout" {
		t.Errorf("the host given up was forgotten (given up %v, reason %q)", given, reason)
	}
	c.mu.Lock()
	_, kept := c.answers["other.test"]
	c.mu.Unlock()
	if kept {
		t.Error("a run of one unanswered request kept after retry.UnansweredMemory")
	}
	c.answeredRobots("slow.test", at)
	if given, _, _ := c.givenUp("slow.test"); given {
		t.Error("an answer did not take the host back")
	}
}
