package fleet

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/crawl-project/crawl/frontier"
	"github.com/redis/go-redis/v9"
)

// OpenExisting opens crawl as Open does, for an operator's command rather than a worker (crawl
// add, crawl urls): with the crawl's own configuration (a ByAddress crawl's new names are
// looked up with the system resolver), and failing with ErrNoCrawl when Redis holds no crawl
// of that name rather than creating one. A Redis older than 6.2 is refused first, as Open
// refuses it (ErrServerTooOld).
func OpenExisting(ctx context.Context, rdb redis.UniversalClient, crawl, worker string) (*Store, error) {
	if err := validName(crawl); err != nil {
		return nil, err
	}
	probe := &Store{rdb: rdb, k: keys{crawl: crawl}, opts: (*Options)(nil).withDefaults()}
	if err := probe.checkServers(ctx); err != nil {
		return nil, err
	}
	cfg, err := rdb.Get(ctx, keys{crawl: crawl}.config()).Result()
	if errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("%w: %q", ErrNoCrawl, crawl)
	}
	if err != nil {
		return nil, fmt.Errorf("fleet: read crawl %q: %w", crawl, err)
	}
	partitions, err := parseConfig(crawl, cfg)
	if err != nil {
		return nil, err
	}
	return Open(ctx, rdb, crawl, worker, &Options{Partitions: partitions, Placement: placementOf(cfg)})
}

// Value returns the crawl-wide value name (Settle), and whether it has one.
func (s *Store) Value(ctx context.Context, name string) (string, bool, error) {
	v, err := s.rdb.Get(ctx, s.k.shared(name)).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return "", false, nil
	case err != nil:
		return "", false, fmt.Errorf("fleet: shared value %s: %w", name, err)
	}
	return v, true, nil
}

// Value is Store.Value bounded by the frontier's timeout.
func (f *Frontier) Value(name string) (string, bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), f.opts.Timeout)
	defer cancel()
	return f.s.Value(ctx, name)
}

// QueueState is where a queued URL is in Redis.
type QueueState int

const (
	QueueWaiting  QueueState = iota // in its host's queue
	QueueDelayed                    // in its host's delayed set, for a retry
	QueueInFlight                   // leased to a worker
)

func (q QueueState) String() string {
	switch q {
	case QueueDelayed:
		return "delayed"
	case QueueInFlight:
		return "in flight"
	}
	return "waiting"
}

// QueuedURL is one URL in state queued as Redis holds it.
type QueuedURL struct {
	frontier.Entry
	Attempts  int // attempts made so far
	Partition int
	State     QueueState
	At        time.Time // QueueDelayed: not before; QueueInFlight: the lease's deadline (Redis' clock)
}

// queuedChunk is how many items Queued reads from a list at a time.
const queuedChunk = 512

// Queued calls fn for every URL queued in the crawl (waiting, delayed or in flight), partition
// by partition (those of the crawl's active set), host by host, reading a queue queuedChunk
// items at a time; fn's error stops it. An item that cannot be read is skipped, and
// unreadable (if not nil) is called with the error naming it. It writes nothing. URLs in state fetched, failed or excluded are not listed: the seen-set
// keeps their fingerprints only. While workers run, it is a near snapshot: a URL taken or
// completed meanwhile may be listed twice or not at all.
func (s *Store) Queued(ctx context.Context, fn func(QueuedURL) error, unreadable func(error)) error {
	if unreadable == nil {
		unreadable = func(error) {}
	}
	active, err := s.activePartitions(ctx)
	if err != nil {
		return err
	}
	for _, p := range active {
		hosts, err := s.rdb.SMembers(ctx, s.k.hosts(p)).Result()
		if err != nil {
			return fmt.Errorf("fleet: list hosts: %w", err)
		}
		for _, host := range hosts {
			for start := int64(0); ; start += queuedChunk {
				items, err := s.rdb.LRange(ctx, s.k.queue(p, host), start, start+queuedChunk-1).Result()
				if err != nil {
					return fmt.Errorf("fleet: list queue of %s: %w", host, err)
				}
				for _, m := range items {
					if err := emit(fn, unreadable, s.k.queue(p, host), host, m, p, QueueWaiting, 0); err != nil {
						return err
					}
				}
				if len(items) < queuedChunk {
					break
				}
			}
			if err := s.scored(ctx, s.k.delayed(p, host), host, p, QueueDelayed, fn, unreadable); err != nil {
				return err
			}
		}
		if err := s.scored(ctx, s.k.inflight(p), "", p, QueueInFlight, fn, unreadable); err != nil {
			return err
		}
	}
	return nil
}

// scored calls fn for the items of the sorted set key, whose scores are times in ms: those of
// host's delayed set, or with host "" the in-flight set's members.
func (s *Store) scored(ctx context.Context, key, host string, p int, st QueueState, fn func(QueuedURL) error, unreadable func(error)) error {
	for start := int64(0); ; start += queuedChunk {
		zs, err := s.rdb.ZRangeWithScores(ctx, key, start, start+queuedChunk-1).Result()
		if err != nil {
			return fmt.Errorf("fleet: list %s: %w", key, err)
		}
		for _, z := range zs {
			m, _ := z.Member.(string)
			if err := emit(fn, unreadable, key, host, m, p, st, int64(z.Score)); err != nil {
				return err
			}
		}
		if len(zs) < queuedChunk {
			return nil
		}
	}
}

// emit calls fn for the item m of host's queue or delayed set, or with host "" the in-flight
// member m (read from key); unreadable for one that cannot be read.
func emit(fn func(QueuedURL) error, unreadable func(error), key, host, m string, p int, st QueueState, ms int64) error {
	var it item
	var err error
	if host == "" {
		it, _, err = decodeMember(m)
	} else {
		it, err = decodeItem(host, m)
	}
	if err != nil {
		unreadable(fmt.Errorf("%s: %w", key, err))
		return nil
	}
	q := QueuedURL{Entry: it.entry(), Attempts: it.Attempts, Partition: p, State: st}
	if ms != 0 {
		q.At = time.UnixMilli(ms)
	}
	return fn(q)
}
