package fleet

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crawl-project/crawl/frontier"
)

// graph is a small link graph: hosts h0..h(H-1) with N pages each; page i links to pages
// 2i+1 and 2i+2 of its host and to page i of the next host, so every page is reachable from
// http://h0.example/0.
type graph struct{ hosts, pages int }

func (g graph) url(h, i int) frontier.Entry {
	host := fmt.Sprintf("h%d.example", h)
	return frontier.Entry{URL: fmt.Sprintf("http://%s/%d", host, i), Host: host}
}

func (g graph) links(e frontier.Entry) []frontier.Entry {
	var h, i int
	fmt.Sscanf(strings.TrimPrefix(e.URL, "http://h"), "%d.example/%d", &h, &i)
	var out []frontier.Entry
	for _, j := range []int{2*i + 1, 2*i + 2} {
		if j < g.pages {
			out = append(out, g.url(h, j))
		}
	}
	out = append(out, g.url((h+1)%g.hosts, i))
	for k := range out {
		out[k].Depth, out[k].Parent = e.Depth+1, e.URL
	}
	return out
}

// tally records what the workers did to each URL.
type tally struct {
	mu        sync.Mutex
	taken     map[string]int // Take handed it out
	completed map[string]int // Complete (Fetched) was accepted
	abandoned map[string]bool
	fenced    map[string]int // Complete refused: the worker's lease had lapsed (a loaded machine)
}

// worker is a test driver of one Store, doing what a crawl worker does: keep a fair share of
// partitions (Keeper), forward their outboxes, lease and complete URLs with their links. With
// dieAfter > 0 it stops after that many completions, leaving three URLs in flight and its
// partitions held, as SIGKILL would.
func worker(ctx context.Context, s *Store, g graph, dieAfter int, tl *tally) error {
	k := s.NewKeeper()
	done := 0
	for {
		if idle, err := s.Idle(ctx); err != nil || idle {
			return err
		}
		ch, err := k.Tick(ctx, time.Now())
		if err != nil {
			return err
		}
		for _, p := range ch.Surplus {
			if err := k.Release(ctx, p); err != nil {
				return err
			}
		}
		before := done
		for _, o := range k.Owned(time.Now()) {
			if err := crawlPartition(ctx, s, o, g, dieAfter, &done, tl); err != nil {
				return err
			}
			if dieAfter > 0 && len(tl.abandonedNow()) == 3 {
				return nil
			}
		}
		if done == before {
			time.Sleep(5 * time.Millisecond) // nothing to do here now: leave the CPU to others
		}
	}
}

// crawlPartition forwards o's outbox, records its inbox and leases and completes one URL of
// each of its hosts.
func crawlPartition(ctx context.Context, s *Store, o Ownership, g graph, dieAfter int, done *int, tl *tally) error {
	if _, err := s.Forward(ctx, o); err != nil && !errors.Is(err, ErrFenced) {
		return err
	}
	if _, err := s.Drain(ctx, o); err != nil && !errors.Is(err, ErrFenced) {
		return err
	}
	hosts, err := s.Hosts(ctx, o)
	if err != nil {
		return err
	}
	for _, h := range hosts {
		l, ok, _, err := s.Take(ctx, o, h)
		if errors.Is(err, ErrFenced) {
			return nil
		}
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		tl.mu.Lock()
		tl.taken[l.URL]++
		tl.mu.Unlock()
		if dieAfter > 0 && *done >= dieAfter {
			tl.mu.Lock()
			tl.abandoned[l.URL] = true
			n := len(tl.abandoned)
			tl.mu.Unlock()
			if n == 3 {
				return nil
			}
			continue
		}
		err = s.Complete(ctx, o, l, frontier.Result{Kind: frontier.Fetched, Links: g.links(l.Entry)})
		if errors.Is(err, ErrFenced) {
			// The lease lapsed: the URL goes back to its queue with the next owner.
			tl.mu.Lock()
			tl.fenced[l.URL]++
			tl.mu.Unlock()
			return nil
		}
		if err != nil {
			return err
		}
		*done++
		tl.mu.Lock()
		tl.completed[l.URL]++
		tl.mu.Unlock()
	}
	return nil
}

func (tl *tally) abandonedNow() map[string]bool {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return maps.Clone(tl.abandoned)
}

// A worker stops dead with URLs in flight and partitions held; two others take its partitions
// over when its leases and heartbeat expire and share the rest of the crawl: every page is
// completed exactly once, and only the URLs in flight at the stop are handed out twice.
func TestWorkersShareCrawlAndSurviveADeadOne(t *testing.T) {
	rdb := newRedis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	g := graph{hosts: 12, pages: 40}
	opts := &Options{Partitions: 8, LeaseTTL: time.Second}
	tl := &tally{taken: map[string]int{}, completed: map[string]int{}, abandoned: map[string]bool{}, fenced: map[string]int{}}
	var stores []*Store
	for w := range 3 {
		stores = append(stores, newStore(t, rdb, "w"+strconv.Itoa(w), opts))
	}
	if _, err := stores[1].Add(ctx, []frontier.Entry{g.url(0, 0)}); err != nil {
		t.Fatal(err)
	}
	// The first worker crawls alone (so it surely gets work) until it stops dead; the other
	// two start then, wait for its leases and heartbeat to expire, and share the rest.
	if err := worker(ctx, stores[0], g, 40, tl); err != nil {
		t.Fatalf("worker 0: %v", err)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(stores))
	for w, s := range stores[1:] {
		wg.Go(func() { errs[w+1] = worker(ctx, s, g, 0, tl) })
	}
	wg.Wait()
	for w, err := range errs {
		if err != nil {
			t.Fatalf("worker %d: %v", w, err)
		}
	}
	if len(tl.abandoned) != 3 {
		t.Fatalf("the dying worker left %d URLs in flight, want 3 (did it run?)", len(tl.abandoned))
	}
	for h := range g.hosts {
		for i := range g.pages {
			u := g.url(h, i).URL
			if tl.completed[u] != 1 {
				t.Errorf("%s completed %d times", u, tl.completed[u])
			}
			lost := tl.fenced[u]
			if tl.abandoned[u] {
				lost++
			}
			if tl.taken[u] != 1+lost {
				t.Errorf("%s handed out %d times; in flight at the stop: %v, refused completions: %d", u, tl.taken[u], tl.abandoned[u], tl.fenced[u])
			}
		}
	}
	c, err := stores[2].Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c.Fetched != g.hosts*g.pages || c.Queued != 0 {
		t.Fatalf("counts %+v, want %d fetched", c, g.hosts*g.pages)
	}
	t.Logf("%d pages; worker stopped with %v in flight; %d completions refused after a lapse", c.Fetched, tl.abandoned, len(tl.fenced))
}
