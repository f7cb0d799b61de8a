package fleet

import (
	"context"
	"fmt"
	"slices"
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

// Union is Store.Union bounded by the frontier's timeout (crawler.SharedSettings).
func (f *Frontier) Union(name string, members []string) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), f.opts.Timeout)
	defer cancel()
	return f.s.Union(ctx, name, members)
}

// Settle is Store.Settle bounded by the frontier's timeout (crawler.SharedSettings).
func (f *Frontier) Settle(name, value string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), f.opts.Timeout)
	defer cancel()
	return f.s.Settle(ctx, name, value)
}
