package crawler

import (
	"net/http"
	"testing"
	"time"

	"github.com/crawl-project/crawl/robots"
	"github.com/crawl-project/crawl/storage"
)

// TestRobotsPhases walks one host's robots state through its transitions on a fake clock: each
// step's phase is the one written at the transition, read at a time before or after its next.
func TestRobotsPhases(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	const ttl, retry = time.Hour, time.Second
	ok := storage.RobotsEntry{Host: "a.test", Status: http.StatusOK, Body: []byte("User-agent: *\nDisallow: /x\n"), FetchedAt: t0}
	down := func(failures int) storage.RobotsEntry {
		return storage.RobotsEntry{Host: "a.test", Status: http.StatusServiceUnavailable, Failures: failures, FetchedAt: t0}
	}
	set := func(rs *robotsState, e storage.RobotsEntry) {
		rs.set(e, robots.FromResponse(e.Status, e.Body), ttl, retry)
	}
	type step struct {
		name string
		do   func(rs *robotsState)
		at   time.Time
		want robotsPhase
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"fetched", []step{
			{"new", func(*robotsState) {}, t0, robotsNeeded},
			{"load", func(rs *robotsState) {
				if !rs.load() || rs.load() {
					t.Error("load: want true once, then false")
				}
			}, t0, robotsNeeded},
			{"fetch", (*robotsState).setPending, t0, robotsPending},
			{"installed", func(rs *robotsState) { set(rs, ok) }, t0.Add(ttl - time.Nanosecond), robotsReady},
			{"expired", func(*robotsState) {}, t0.Add(ttl), robotsNeeded},
			{"cut short", (*robotsState).unload, t0, robotsNeeded},
		}},
		{"staged", []step{
			{"stage", func(rs *robotsState) { rs.load(); rs.stage(ok) }, t0, robotsStaged},
			{"take", func(rs *robotsState) {
				if _, ok := rs.takeStaged(); !ok {
					t.Error("takeStaged: nothing staged")
				}
			}, t0, robotsPending},
			{"installed", func(rs *robotsState) { set(rs, ok) }, t0, robotsReady},
		}},
		{"unreachable", []step{
			{"first failure", func(rs *robotsState) { set(rs, down(1)) }, t0, robotsWait},
			{"due", func(*robotsState) {}, t0.Add(retry), robotsNeeded},
			{"given up, due", (*robotsState).giveUp, t0.Add(retry), robotsGaveUp},
			{"fetched again", func(rs *robotsState) { set(rs, down(2)) }, t0, robotsWait},
			{"too many", func(rs *robotsState) { set(rs, down(robotsMaxFailures)) }, t0.Add(time.Hour), robotsGaveUp},
			{"answered", func(rs *robotsState) { set(rs, ok) }, t0, robotsReady},
			{"give up ignored", (*robotsState).giveUp, t0, robotsReady},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var rs robotsState
			for _, s := range tc.steps {
				s.do(&rs)
				if got, _ := rs.state(s.at); got != s.want {
					t.Fatalf("%s: phase %v, want %v", s.name, got, s.want)
				}
			}
		})
	}
}
