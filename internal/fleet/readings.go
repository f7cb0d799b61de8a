package fleet

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/crawl-project/crawl/frontier"
	"github.com/crawl-project/crawl/internal/readyset"
	"github.com/redis/go-redis/v9"
)

// readings is what Run last read of Redis: every partition's counters, those of the
// partitions in use, and the offset of Redis' clock. Guarded by Frontier.mu.
type readings struct {
	counts Partitions // every partition's, read at one instant (nil before the first read)
	full   time.Time  // when counts was read
	age    countsAge  // whether counts may miss a write of this worker

	held     map[int]PartCounts // the partitions in use, as last read
	heldAt   time.Time          // when every partition in use was last read
	outboxed map[int]bool       // partitions whose outbox this worker filled since it last read it empty

	offset time.Duration // Redis' clock minus the local clock
}

// fullEvery is how often a worker with URLs in flight (which cannot be idle) reads every
// partition's counters, for Counts; idleEvery is how often one with none reads them, to learn
// promptly that the crawl is over. (Each read is a command per partition.)
const (
	fullEvery = time.Second
	idleEvery = 250 * time.Millisecond
)

// heldEvery is how often a worker reads the counters of every partition it holds, to learn
// of URLs other workers queued there; in between, each round reads only the partitions it
// knows busy (hosts with work, URLs in flight, links to forward).
const heldEvery = time.Second

// heldFields are the counters readHeld reads of each partition in use.
var heldFields = [4]string{"queued", "inflight", "outbox", "inbox"}

// readHeld reads, in one pipeline, Redis' clock (setting the offset of Redis' clock from the
// local one, at the round trip's midpoint) and the counters and hosts with work of the
// partitions in use: every heldEvery all of them, and in between those known busy. It returns
// the hosts with work it read, by partition.
func (f *Frontier) readHeld(ctx context.Context, now time.Time) (map[int][]string, error) {
	f.mu.Lock()
	all := now.Sub(f.view.heldAt) >= heldEvery
	busy := map[int]bool{}
	if !all {
		for name, st := range f.hosts.All() {
			if q, ok := f.s.knownPartition(name); ok && st != readyset.Idle {
				busy[q] = true
			}
		}
		for _, l := range f.inflight.leases {
			busy[l.Partition] = true
		}
		for p := range f.view.outboxed {
			busy[p] = true
		}
	}
	ps := make([]int, 0, len(f.parts.inUse))
	for p := range f.parts.inUse {
		if all || busy[p] {
			ps = append(ps, p)
		}
	}
	f.mu.Unlock()
	if all { // the partitions that never had work have nothing to read
		active, err := f.s.activePartitions(ctx)
		if err != nil {
			return nil, err
		}
		ps = slices.DeleteFunc(ps, func(p int) bool { _, ok := slices.BinarySearch(active, p); return !ok })
	}
	read := make(map[int]PartCounts, len(ps))
	members := make(map[int][]string, len(ps))
	pipe := f.s.rdb.Pipeline()
	clock := pipe.Time(ctx)
	cmds := make([]*redis.SliceCmd, len(ps))
	hosts := make([]*redis.StringSliceCmd, len(ps))
	for i, p := range ps {
		cmds[i] = pipe.HMGet(ctx, f.s.k.counts(p), heldFields[:]...)
		hosts[i] = pipe.SMembers(ctx, f.s.k.hosts(p))
	}
	sent := time.Now()
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("fleet: read counts: %w", err)
	}
	got := time.Now()
	offset := clock.Val().Sub(sent.Add(got.Sub(sent) / 2))
	for i, p := range ps {
		members[p] = hosts[i].Val()
		var n [len(heldFields)]int
		var c PartCounts
		key := f.s.k.counts(p)
		for j, v := range cmds[i].Val() {
			if s, ok := v.(string); ok {
				var good bool
				if n[j], good = countOf(key, heldFields[j], s); !good {
					c.Damaged = append(c.Damaged, badValue(key, heldFields[j], s, "a count").Error())
				}
			}
		}
		c.Queued, c.InFlight, c.Outbox, c.Inbox = n[0], n[1], n[2], n[3]
		read[p] = c
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.view.offset = offset
	if all {
		f.view.held, f.view.heldAt = read, now
	} else {
		for p := range f.view.held {
			if f.parts.inUse[p] == nil {
				delete(f.view.held, p)
			}
		}
		maps.Copy(f.view.held, read)
	}
	for p, c := range read {
		if c.Outbox == 0 {
			delete(f.view.outboxed, p)
		}
	}
	return members, nil
}

// readCounts reads the crawl's counters.
func (f *Frontier) readCounts(ctx context.Context) error {
	f.mu.Lock()
	marks := f.view.age.marks // a write from now on may be missing from this read
	f.mu.Unlock()
	ps, err := f.s.PartitionCounts(ctx)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil {
		f.view.age.mark()
		return err
	}
	f.view.counts, f.view.full, f.view.age.counted = ps, time.Now(), marks
	return nil
}

// countsAge says whether a Frontier's counts may miss a write of its worker (an Add, an
// Exclude, a resend): every such write marks it, and a read of the counts records the marks
// made before it began. Until a read begun after the last mark is in, the counts are stale,
// the read itself in flight included.
type countsAge struct {
	marks   uint64 // writes made
	counted uint64 // marks when the read behind counts began
}

func (a *countsAge) mark() { a.marks++ }

func (a countsAge) stale() bool { return a.marks != a.counted }

// Counts returns the crawl's counters (all workers) as of Run's last read of every partition
// (at most a second old), or read now if this worker added URLs since. Before any read
// succeeded it reads, retrying while Redis does not answer for up to
// FrontierOptions.Patience: zeros read as "nothing to resume" are not served for a failure.
func (f *Frontier) Counts() frontier.Counts {
	f.mu.Lock()
	dirty, never := f.view.age.stale(), f.view.counts == nil
	f.mu.Unlock()
	if never {
		_ = f.retry(f.readCounts)
	} else if dirty {
		ctx, cancel := context.WithTimeout(context.Background(), f.opts.Timeout)
		_ = f.readCounts(ctx) // on failure the last counts serve
		cancel()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.view.counts.Sum()
}

// Idle reports whether the whole crawl is over: at Run's last read of every partition nothing
// was queued, delayed, in flight or in an outbox in any of them, this worker added nothing
// since, and it holds no lease and no link left out that a Redis restart may have lost
// (watchServers).
func (f *Frontier) Idle() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.idleLocked()
}

func (f *Frontier) idleLocked() bool {
	return f.view.counts != nil && !f.view.age.stale() && f.view.counts.Idle() && len(f.inflight.leases) == 0 && len(f.inflight.putBack) == 0 &&
		f.resend.len() == 0 && !f.recent.pending()
}
