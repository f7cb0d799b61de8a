package fleet

import (
	"context"
	"fmt"
	"log/slog"
	"slices"

	"github.com/crawl-project/crawl/frontier"
	"github.com/crawl-project/crawl/hostlimit"
	"github.com/crawl-project/crawl/storage"
)

// Union adds members to the crawl-wide set name and returns every member it holds, sorted:
// settings that grow as workers join, such as the scope the seeds of each widen.
func (s *Store) Union(ctx context.Context, name string, members []string) ([]string, error) {
	pipe := s.rdb.TxPipeline()
	if len(members) > 0 {
		args := make([]any, len(members))
		for i, m := range members {
			args[i] = m
		}
		pipe.SAdd(ctx, s.k.shared(name), args...)
	}
	all := pipe.SMembers(ctx, s.k.shared(name))
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("fleet: shared set %s: %w", name, err)
	}
	out := all.Val()
	slices.Sort(out)
	return out, nil
}

// Count returns how many members the crawl-wide set name holds.
func (s *Store) Count(ctx context.Context, name string) (int, error) {
	n, err := s.rdb.SCard(ctx, s.k.shared(name)).Result()
	if err != nil {
		return 0, fmt.Errorf("fleet: shared set %s: %w", name, err)
	}
	return int(n), nil
}

// Settle sets the crawl-wide value name to value unless it has one, and returns the value it
// holds: a setting the first worker fixes for all, such as the scope's mode.
func (s *Store) Settle(ctx context.Context, name, value string) (string, error) {
	pipe := s.rdb.TxPipeline()
	pipe.SetNX(ctx, s.k.shared(name), value, 0)
	got := pipe.Get(ctx, s.k.shared(name))
	if _, err := pipe.Exec(ctx); err != nil {
		return "", fmt.Errorf("fleet: shared value %s: %w", name, err)
	}
	return got.Val(), nil
}

// Union is Store.Union bounded by the frontier's timeout (crawler.Shared).
func (f *Frontier) Union(name string, members []string) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), f.opts.Timeout)
	defer cancel()
	return f.s.Union(ctx, name, members)
}

// Count is Store.Count bounded by the frontier's timeout (crawler.Shared).
func (f *Frontier) Count(name string) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), f.opts.Timeout)
	defer cancel()
	return f.s.Count(ctx, name)
}

// Settle is Store.Settle bounded by the frontier's timeout (crawler.Shared).
func (f *Frontier) Settle(name, value string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), f.opts.Timeout)
	defer cancel()
	return f.s.Settle(ctx, name, value)
}

// Join binds f to the worker that crawls with it (crawler.Shared): Complete stores a Fetched
// result's page in pages before it records the rest in Redis, and Run calls checkpoint (the
// crawler's SaveHostStates) before it hands a surplus partition back, while the partition is
// still this worker's, so that the next owner of its hosts starts from their state now, not
// from the last periodic save. Either may be nil: no page may then be completed, no
// checkpoint is made.
func (f *Frontier) Join(pages *storage.DB, checkpoint func() error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.store, f.save = pages, checkpoint
}

// storePage stores a Fetched result's page in the worker's store (Join), before Complete
// records its URL's state in Redis: a crash between the two fetches the page again, and never
// marks done a page that is not stored.
func (f *Frontier) storePage(l frontier.Lease, r frontier.Result) error {
	if r.Kind != frontier.Fetched || r.Page == nil {
		return nil
	}
	f.mu.Lock()
	store := f.store
	f.mu.Unlock()
	if store == nil {
		return fmt.Errorf("fleet: page %s completed before a worker's store joined the frontier (Join)", l.URL)
	}
	if _, err := store.StorePage(r.Page); err != nil {
		return fmt.Errorf("store page %s: %w", l.URL, err)
	}
	return nil
}

// Where names the shared crawl for the worker's store (crawler.Shared): FrontierOptions.Redis
// and FrontierOptions.Crawl.
func (f *Frontier) Where() (redis, crawl string) { return f.opts.Redis, f.opts.Crawl }

// HostStates is the store of hosts' learned politeness (crawler.Shared): Keeper.HostStates
// bounded by the frontier's timeout, whose saves are checkpoints. One that Redis cannot take
// (it is unreachable) is logged and skipped, not a reason to stop the crawl as a failing local
// store would be; the next one saves the state again.
func (f *Frontier) HostStates() hostlimit.StateStore {
	return checkpoints{f.k.HostStates(f.opts.Timeout), f.opts.Log}
}

type checkpoints struct {
	hostlimit.StateStore
	log *slog.Logger
}

func (c checkpoints) SaveHostStates(states map[string][]byte) error {
	if err := c.StateStore.SaveHostStates(states); err != nil {
		c.log.Warn("hosts' learned state not saved to Redis; the next checkpoint will", "err", err)
	}
	return nil
}

// LoadRobots returns the robots.txt last saved for host by any worker (Keeper.Robots, bounded
// by the frontier's timeout).
func (f *Frontier) LoadRobots(host string) ([]byte, bool, error) {
	return f.k.Robots(f.opts.Timeout).LoadRobots(host)
}

// SaveRobots saves host's robots.txt if the worker holds its partition, and reports whether it
// saved it (Keeper.Robots).
func (f *Frontier) SaveRobots(host string, b []byte) (saved bool, err error) {
	return f.k.Robots(f.opts.Timeout).SaveRobots(host, b)
}
