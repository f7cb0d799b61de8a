package fleet

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/crawl-project/crawl/frontier"
	"github.com/redis/go-redis/v9"
)

// Idle reports whether the whole crawl has nothing left to do: no URL queued, delayed or in
// flight, and no links waiting in an outbox or an inbox, in any partition.
func (s *Store) Idle(ctx context.Context) (bool, error) {
	ps, err := s.PartitionCounts(ctx)
	return ps.Idle(), err
}

// Counts sums the partitions' counters (one transaction), with the failed and excluded URLs by
// reason.
func (s *Store) Counts(ctx context.Context) (frontier.Counts, error) {
	ps, err := s.PartitionCounts(ctx)
	return ps.Sum(), err
}

// PartCounts are the counters of one partition.
type PartCounts struct {
	frontier.Counts
	Outbox   int // payloads waiting for Forward
	Inbox    int // payloads of URLs sent to the partition, waiting for its owner (Drain)
	Bad      int // unreadable values set aside in the partition's bad list
	Repaired int // damaged values the scripts or the owner's recount repaired
	// Damaged names the counters that are not integers in [0, maxCount] (read as 0): the
	// partition is not idle until its owner recounts them (Store.recount).
	Damaged []string
}

// Partitions are the counters of every partition, indexed by partition, read at one instant.
type Partitions []PartCounts

// Idle reports whether nothing is queued, delayed, in flight or in an outbox or inbox in any
// partition (and no partition's counters are damaged).
func (ps Partitions) Idle() bool {
	for _, p := range ps {
		if p.Queued != 0 || p.Outbox != 0 || p.Inbox != 0 || len(p.Damaged) > 0 {
			return false
		}
	}
	return true
}

// Sum adds the partitions' counters up.
func (ps Partitions) Sum() frontier.Counts {
	c := frontier.Counts{FailedBy: map[string]int{}, ExcludedBy: map[string]int{}}
	for _, p := range ps {
		c.Queued += p.Queued
		c.Delayed += p.Delayed
		c.InFlight += p.InFlight
		c.Fetched += p.Fetched
		c.Failed += p.Failed
		c.Excluded += p.Excluded
		for r, n := range p.FailedBy {
			c.FailedBy[r] += n
		}
		for r, n := range p.ExcludedBy {
			c.ExcludedBy[r] += n
		}
	}
	return c
}

// markActive adds partitions ps to the crawl's active set before anything is written to
// them, so that the set holds every partition that may have work (a crash between the two
// leaves a partition listed with nothing in it, which costs a read). Each Store adds a
// partition once.
func (s *Store) markActive(ctx context.Context, ps []int) error {
	s.mu.Lock()
	var add []any
	for _, p := range ps {
		if !s.active[p] {
			add = append(add, p)
		}
	}
	s.mu.Unlock()
	if len(add) == 0 {
		return nil
	}
	if err := s.rdb.SAdd(ctx, s.k.active(), add...).Err(); err != nil {
		return fmt.Errorf("fleet: mark partitions active: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.active == nil {
		s.active = map[int]bool{}
	}
	for _, p := range add {
		s.active[p.(int)] = true
	}
	return nil
}

// activePartitions reads the crawl's active set: every partition that may have work.
func (s *Store) activePartitions(ctx context.Context) ([]int, error) {
	ms, err := s.rdb.SMembers(ctx, s.k.active()).Result()
	if err != nil {
		return nil, fmt.Errorf("fleet: read active partitions: %w", err)
	}
	ps := make([]int, 0, len(ms))
	for _, m := range ms {
		if p, err := strconv.Atoi(m); err == nil && p >= 0 && p < s.opts.Partitions {
			ps = append(ps, p)
		}
	}
	slices.Sort(ps)
	return ps, nil
}

// PartitionCounts reads every partition's counters, pipelined (on a cluster, one pipeline per
// node): those of the crawl's active set, the others being empty. The partitions are read one after another, so the totals are a near snapshot; but
// when they say the crawl is idle, they are read again until two reads agree, so that an idle
// answer is true of one instant: a Forward between two reads cannot hide the links it moves
// from one partition to another. (Nothing goes from busy to idle and back without changing a
// counter that only grows: fetched, failed or excluded.)
func (s *Store) PartitionCounts(ctx context.Context) (Partitions, error) {
	ps, err := s.readPartitionCounts(ctx)
	for range idleRereads {
		if err != nil || !ps.Idle() {
			return ps, err
		}
		again, err := s.readPartitionCounts(ctx)
		if err != nil {
			return nil, err
		}
		if reflect.DeepEqual(again, ps) {
			return ps, nil
		}
		ps = again
	}
	return nil, fmt.Errorf("fleet: read counts: still changing after %d reads", idleRereads)
}

// idleRereads bounds the reads of PartitionCounts' idle check.
const idleRereads = 8

func (s *Store) readPartitionCounts(ctx context.Context) (Partitions, error) {
	active, err := s.activePartitions(ctx)
	if err != nil {
		return nil, err
	}
	ps := make(Partitions, s.opts.Partitions)
	if len(active) == 0 {
		return ps, nil
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(active))
	for i, p := range active {
		cmds[i] = pipe.HGetAll(ctx, s.k.counts(p))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("fleet: read counts: %w", err)
	}
	for i, cmd := range cmds {
		c := &ps[active[i]]
		fields := map[string]*int{"queued": &c.Queued, "delayed": &c.Delayed, "inflight": &c.InFlight,
			"fetched": &c.Fetched, "failed": &c.Failed, "excluded": &c.Excluded, "outbox": &c.Outbox,
			"inbox": &c.Inbox, "bad": &c.Bad, "repaired": &c.Repaired}
		key := s.k.counts(active[i])
		for name, v := range cmd.Val() {
			n, ok := countOf(key, name, v)
			if !ok {
				c.Damaged = append(c.Damaged, badValue(key, name, v, "a count").Error())
				continue
			}
			if f := fields[name]; f != nil {
				*f += n
			} else if reason, ok := strings.CutPrefix(name, "failed:"); ok && n != 0 {
				if c.FailedBy == nil {
					c.FailedBy = map[string]int{}
				}
				c.FailedBy[reasonName(reason)] += n
			} else if reason, ok := strings.CutPrefix(name, "excluded:"); ok && n != 0 {
				if c.ExcludedBy == nil {
					c.ExcludedBy = map[string]int{}
				}
				c.ExcludedBy[reasonName(reason)] += n
			}
		}
	}
	return ps, nil
}
