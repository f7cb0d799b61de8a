package fleet

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/crawl-project/crawl/hostlimit"
	"github.com/redis/go-redis/v9"
)

// HostStates returns a hostlimit.StateStore over the partitions k holds, so that a worker's
// hostlimit.Registry checkpoints each host's learned state (rate, window, pause, Crawl-delay
// ceiling) to Redis and a later owner of the host restores it. Each Redis call is bounded by
// timeout.
//
// Saves are all or nothing per partition, and only for partitions k holds at the time: the
// state of a host whose partition is not held (or turns out fenced) is left to its owner and
// not written, without error. Loads read whatever was saved last, whoever the owner.
func (k *Keeper) HostStates(timeout time.Duration) hostlimit.StateStore {
	return &hostStates{k: k, timeout: timeout}
}

type hostStates struct {
	k       *Keeper
	timeout time.Duration
}

func (h *hostStates) LoadHostState(host string) ([]byte, bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), h.timeout)
	defer cancel()
	return h.k.s.LoadHostState(ctx, host)
}

func (h *hostStates) SaveHostStates(states map[string][]byte) error {
	byPart := make(map[int]map[string][]byte)
	for host, b := range states {
		p := PartitionOf(host, h.k.s.opts.Partitions)
		if byPart[p] == nil {
			byPart[p] = make(map[string][]byte)
		}
		byPart[p][host] = b
	}
	held := make(map[int]Ownership)
	for _, o := range h.k.Owned(time.Now()) {
		held[o.Partition] = o
	}
	var errs []error
	for p, group := range byPart {
		o, ok := held[p]
		if !ok {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), h.timeout)
		err := h.k.s.SaveHostStates(ctx, o, group)
		cancel()
		if err != nil && !errors.Is(err, ErrFenced) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Robots returns the crawl's shared robots.txt cache over the partitions k holds: a host's
// owner saves the robots.txt it fetched, a later owner loads it instead of fetching it again.
// Saves are made only while k holds the host's partition (otherwise, or fenced, they are
// skipped without error); loads read whatever was saved last. Each Redis call is bounded by
// timeout.
func (k *Keeper) Robots(timeout time.Duration) *Robots {
	return &Robots{k: k, timeout: timeout}
}

// Robots is a shared robots.txt cache (Keeper.Robots).
type Robots struct {
	k       *Keeper
	timeout time.Duration
}

// LoadRobots returns the robots.txt last saved for host by any worker.
func (r *Robots) LoadRobots(host string) ([]byte, bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
	defer cancel()
	return r.k.s.LoadRobots(ctx, host)
}

// SaveRobots saves host's robots.txt if k holds its partition, and reports whether it saved
// it: not when k does not hold the partition, nor when the save is fenced (another worker
// holds it by then), neither of which is an error.
func (r *Robots) SaveRobots(host string, b []byte) (saved bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
	defer cancel()
	p, placed, err := r.k.s.partitionOf(ctx, host)
	if err != nil || !placed {
		return false, err
	}
	o, ok := r.k.holding(p, time.Now())
	if !ok {
		return false, nil
	}
	err = r.k.s.SaveRobots(ctx, o, host, b)
	if errors.Is(err, ErrFenced) {
		return false, nil
	}
	return err == nil, err
}

// SaveHostStates writes the learned politeness state of hosts of o's partition (hostlimit's
// encoded state, compacted: encodeHostState), all or nothing; each expires
// Options.HostStateTTL after its last save.
func (s *Store) SaveHostStates(ctx context.Context, o Ownership, states map[string][]byte) error {
	p := o.Partition
	ks := []string{s.k.owner(p)}
	args := []any{o.token, s.opts.HostStateTTL.Milliseconds()}
	for h, b := range states {
		if PartitionOf(h, s.opts.Partitions) != p {
			return fmt.Errorf("%w: %q is not in %d", ErrWrongPartition, h, p)
		}
		ks = append(ks, s.k.state(p, h))
		args = append(args, encodeHostState(b))
	}
	if len(ks) == 1 {
		return nil
	}
	err := setFencedScript.Run(ctx, s.rdb, ks, args...).Err()
	if err = scriptErr(err); err != nil {
		return fmt.Errorf("fleet: save host states of partition %d: %w", p, err)
	}
	return nil
}

// LoadHostState returns the state last saved for host; ok is false when there is none.
func (s *Store) LoadHostState(ctx context.Context, host string) (b []byte, ok bool, err error) {
	b, err = s.rdb.Get(ctx, s.k.state(PartitionOf(host, s.opts.Partitions), host)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("fleet: load state of %q: %w", host, err)
	}
	if b, err = decodeHostState(host, b); err != nil {
		return nil, false, err
	}
	return b, true, nil
}

// SaveRobots stores host's cached robots.txt (opaque bytes) for the host's later owners, if o
// is still the ownership of host's partition (ErrFenced otherwise); it expires
// Options.RobotsTTL after the save.
func (s *Store) SaveRobots(ctx context.Context, o Ownership, host string, b []byte) error {
	p := o.Partition
	if q, ok := s.knownPartition(host); ok && q != p {
		return fmt.Errorf("%w: %q is not in %d", ErrWrongPartition, host, p)
	}
	err := setFencedScript.Run(ctx, s.rdb, []string{s.k.owner(p), s.k.robots(p, host)}, o.token, s.opts.RobotsTTL.Milliseconds(), b).Err()
	if err = scriptErr(err); err != nil {
		return fmt.Errorf("fleet: save robots.txt of %q: %w", host, err)
	}
	return nil
}

// LoadRobots returns the robots.txt last saved for host; ok is false when there is none.
func (s *Store) LoadRobots(ctx context.Context, host string) (b []byte, ok bool, err error) {
	p, placed, err := s.partitionOf(ctx, host)
	if err != nil || !placed {
		return nil, false, err
	}
	b, err = s.rdb.Get(ctx, s.k.robots(p, host)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("fleet: load robots.txt of %q: %w", host, err)
	}
	return b, true, nil
}
