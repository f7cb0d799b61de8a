package fleet

import (
	"context"
	"errors"
	"time"

	"github.com/crawl-project/crawl/hostlimit"
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
