package main

import (
	"testing"
	"time"

	"github.com/crawl-project/crawl/internal/redistest"
	"github.com/crawl-project/crawl/internal/simweb"
)

// Three workers given one node's URL of a real 3-master Redis Cluster crawl the politeness
// web: every page once, within 1% over-limit replies, never banned, and no host with more
// requests in flight than one worker allows.
func TestFleetClusterPoliteness(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, 3, 0)
	f := newClusterFleet(t, c, simweb.PolitenessBench(), steadyLease, "--initial-rate", "2", "--workers", "32")
	start := time.Now()
	ws := []*worker{f.start(""), f.start(""), f.start("")}
	f.finish(ws...)
	pages, over := 0, 0
	for name, s := range f.web.Stats() {
		pages += len(s.Fetched)
		over += s.OverLimit
		if s.Banned {
			t.Errorf("host %s banned the fleet", name)
		}
	}
	t.Logf("3 workers on a 3-master cluster, politeness web: %d pages in %v, %d over-limit replies (%.2f%%)",
		pages, time.Since(start).Round(time.Millisecond), over, 100*float64(over)/float64(max(pages, 1)))
	t.Logf("over-limit replies by host: %s", overLimitByHost(f.web, start))
	if over*100 > pages {
		t.Errorf("%d over-limit replies for %d pages: more than 1%%", over, pages)
	}
	f.checkComplete(0)
	f.idleInRedis()
}

// A master of a 3-master, 3-replica cluster killed (SIGKILL) mid-crawl: its replica is
// promoted, the workers carry on, and the crawl completes with nothing lost; only URLs in
// flight at the failover are fetched twice.
func TestFleetClusterFailover(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, 3, 1)
	f := newClusterFleet(t, c, fleetWeb(), steadyLease)
	ws := []*worker{f.start(""), f.start(""), f.start("")}
	f.waitServed(f.expected() / 3)
	ms, err := c.Masters()
	if err != nil || len(ms) != 3 {
		t.Fatalf("masters %v, err %v", ms, err)
	}
	if err := ms[0].Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	if err := c.WaitHealthy(); err != nil {
		t.Fatal(err)
	}
	t.Logf("replica promoted %v after the kill", time.Since(killed).Round(time.Millisecond))
	f.finish(ws...)
	// writes the killed master acknowledged but had not replicated are lost: the results of
	// the requests in flight at the failover (at most each worker's --workers) may be fetched
	// again without a return to a queue
	f.checkComplete(3 * 8)
	f.idleInRedis()
}
