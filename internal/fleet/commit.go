package fleet

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/crawl-project/crawl/frontier"
)

// commits group the results that several goroutines complete at once into one script per
// partition ownership (a group commit): the first caller of an ownership with nothing being
// committed waits up to FrontierOptions.CommitLinger for the results of the ownership's other
// leases, then commits, in a loop, everything queued for that ownership meanwhile, and hands
// every caller its own outcome. Safe for concurrent use.
type commits struct {
	mu      sync.Mutex
	more    *sync.Cond            // on mu: a result was queued
	queue   map[string][]*pending // by ownership (commitKey)
	running map[string]bool       // an ownership's results are being committed
}

// pending is one result waiting for its group's commit.
type pending struct {
	l    leased
	r    frontier.Result
	sent []uint64     // fingerprints of its links and exclusions, claimed in recentLinks
	done chan outcome // receives the outcome once
}

// outcome is what became of a result sent to Redis.
type outcome struct {
	kind commitKind
	why  string // refused: the reason
}

type commitKind int

const (
	committed commitKind = iota + 1 // recorded
	refused                         // not recorded: fenced, reclaimed, or lapsed while Redis was unreachable
)

// maxBatch bounds the results of one commit script.
const maxBatch = 128

// commitKey names an ownership: its partition and its token (epochs are per partition, so a
// token alone may name ownerships of several).
func commitKey(o Ownership) string { return strconv.Itoa(o.Partition) + "/" + o.token }

func newCommits() *commits {
	c := &commits{queue: map[string][]*pending{}, running: map[string]bool{}}
	c.more = sync.NewCond(&c.mu)
	return c
}

// commit queues p and returns its outcome once its group is committed.
func (c *commits) commit(f *Frontier, p *pending) outcome {
	key := commitKey(p.l.o)
	p.done = make(chan outcome, 1)
	c.mu.Lock()
	c.queue[key] = append(c.queue[key], p)
	c.more.Broadcast()
	if c.running[key] {
		c.mu.Unlock()
		return <-p.done
	}
	c.running[key] = true
	if f.opts.CommitLinger > 0 { // (f.mu is taken under c.mu, never the other way)
		if want := min(f.leasedUnder(p.l.o), maxBatch); len(c.queue[key]) < want {
			c.linger(key, want, f.opts.CommitLinger)
		}
	}
	for {
		batch := c.queue[key]
		if len(batch) == 0 {
			delete(c.queue, key)
			delete(c.running, key)
			c.mu.Unlock()
			return <-p.done
		}
		n := min(len(batch), maxBatch)
		c.queue[key] = batch[n:]
		c.mu.Unlock()
		f.commitBatch(batch[:n])
		c.mu.Lock()
	}
}

// linger waits, with c.mu held, until key has want results queued or d has passed.
func (c *commits) linger(key string, want int, d time.Duration) {
	end := time.Now().Add(d)
	t := time.AfterFunc(d, func() {
		c.mu.Lock()
		c.more.Broadcast()
		c.mu.Unlock()
	})
	defer t.Stop()
	for len(c.queue[key]) < want && time.Now().Before(end) {
		c.more.Wait()
	}
}

// commitBatch records the results of batch (leases of one ownership) in Redis and hands each
// its outcome. While Redis is unreachable it retries, for as long as the partition may still
// be this worker's.
func (f *Frontier) commitBatch(batch []*pending) {
	o := batch[0].l.o
	ds := make([]Done, len(batch))
	for i, p := range batch {
		ds[i] = Done{Lease: p.l.Lease, Result: p.r}
	}
	backoff := 50 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(context.Background(), f.opts.Timeout)
		inFlight, err := f.s.CompleteBatch(ctx, o, ds)
		cancel()
		switch {
		case err == nil:
			for i, p := range batch { // (the links were recorded whatever inFlight says)
				if inFlight[i] {
					p.done <- outcome{kind: committed}
				} else {
					p.done <- outcome{kind: refused, why: ErrNotInFlight.Error()}
				}
			}
			return
		case errors.Is(err, ErrFenced):
			for _, p := range batch {
				f.recent.forget(p.sent)
				p.done <- outcome{kind: refused, why: err.Error()}
			}
			return
		}
		f.linkFailed(err) // an outage seen here counts as one seen by a round
		if !f.mayHold(o, time.Now().Add(backoff)) {
			for _, p := range batch {
				f.recent.forget(p.sent)
				p.done <- outcome{kind: refused, why: "partition lapsed while Redis was unreachable: " + err.Error()}
			}
			return
		}
		sleep(backoff)
		backoff = min(2*backoff, 2*time.Second)
	}
}
