package fleet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Acquire tries to take partition p: free, held by a worker whose lease has ended, or left by
// this worker before (its own lease lapsed meanwhile). sent is the local time at which the
// worker's live lease was last renewed (Keeper: its last heartbeat's send time); the ownership
// lasts as long as that lease. ok is false, with no error, when a live worker holds p. A new
// owner should call Reclaim before leasing. (Keeper.Tick does the same for many partitions
// with fewer round trips.)
func (s *Store) Acquire(ctx context.Context, sent time.Time, p int) (o Ownership, ok bool, err error) {
	if p < 0 || p >= s.opts.Partitions {
		return o, false, fmt.Errorf("fleet: partition %d out of range [0,%d)", p, s.opts.Partitions)
	}
	cur, err := s.rdb.Get(ctx, s.k.owner(p)).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return o, false, fmt.Errorf("fleet: acquire partition %d: %w", p, err)
	}
	if id := tokenWorker(cur); cur != "" && id != s.worker {
		alive, err := s.alive(ctx, []string{id})
		if err != nil {
			return o, false, fmt.Errorf("fleet: acquire partition %d: %w", p, err)
		}
		if alive[id] {
			return o, false, nil
		}
	}
	return s.acquireFrom(ctx, sent, p, cur)
}

// acquireFrom takes partition p if its owner key still holds the token from (read by the
// caller after it learned that from's worker is no longer alive; "" for no owner). Reading
// the owner before the liveness makes it safe: a worker never revives a token it held once
// its lease ended (Keeper drops everything), and one it takes again has a new epoch.
func (s *Store) acquireFrom(ctx context.Context, sent time.Time, p int, from string) (o Ownership, ok bool, err error) {
	r, err := acquireScript.Run(ctx, s.rdb, []string{s.k.owner(p), s.k.epoch(p)}, from, s.worker).Slice()
	if err != nil {
		return o, false, fmt.Errorf("fleet: acquire partition %d: %w", p, err)
	}
	epoch, _ := r[0].(int64)
	if epoch == 0 {
		return o, false, nil
	}
	tok, _ := r[1].(string)
	s.holdSeen(p, tok)
	return Ownership{Partition: p, Epoch: epoch, token: tok, sent: sent, ttl: s.opts.LeaseTTL}, true, nil
}

// tokenWorker is the worker named by an owner token EPOCH:WORKER ("" for none).
func tokenWorker(tok string) string {
	_, id, _ := strings.Cut(tok, ":")
	return id
}

// Release hands o's partition back at once (ErrFenced if it was no longer o's), and counts the
// release in the crawl's released counter, which tells workers below their fair share to look
// for free partitions.
func (s *Store) Release(ctx context.Context, o Ownership) error {
	s.dropSeen(o.Partition, o.token)
	err := releaseScript.Run(ctx, s.rdb, []string{s.k.owner(o.Partition)}, o.token).Err()
	if err = scriptErr(err); err != nil {
		return fmt.Errorf("fleet: release partition %d: %w", o.Partition, err)
	}
	if err := s.rdb.Incr(ctx, s.k.released()).Err(); err != nil {
		return fmt.Errorf("fleet: release partition %d: count it: %w", o.Partition, err)
	}
	return nil
}

// beat is the outcome of a worker's heartbeat.
type beat struct {
	lease leaseBeat
	live  []string // the workers whose lease is live, this one included, sorted
}

// leaseBeat says what a heartbeat did to the worker's lease.
type leaseBeat int

const (
	leaseRenewed leaseBeat = iota + 1 // it was live and is extended: the ownerships held stay valid
	leaseStarted                      // there was none (first beat) or it had ended: every ownership held before is void
)

// heartbeat renews s's worker's lease for a TTL from now on Redis' clock (or starts one) and
// reads the live workers: one script on the crawl's workers set.
func (s *Store) heartbeat(ctx context.Context) (beat, error) {
	r, err := heartbeatScript.Run(ctx, s.rdb, []string{s.k.workers()}, s.worker, s.opts.LeaseTTL.Milliseconds()).Slice()
	if err != nil {
		return beat{}, fmt.Errorf("fleet: heartbeat: %w", err)
	}
	b := beat{lease: leaseStarted}
	if kept, _ := r[0].(int64); kept == 1 {
		b.lease = leaseRenewed
	}
	for _, m := range r[1:] {
		if id, ok := m.(string); ok {
			b.live = append(b.live, id)
		}
	}
	slices.Sort(b.live)
	return b, nil
}

// alive reads which of the workers ids have a live lease now, on Redis' clock.
func (s *Store) alive(ctx context.Context, ids []string) (map[string]bool, error) {
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	r, err := aliveScript.Run(ctx, s.rdb, []string{s.k.workers()}, args...).Int64Slice()
	if err != nil {
		return nil, fmt.Errorf("fleet: read live workers: %w", err)
	}
	m := make(map[string]bool, len(ids))
	for i, id := range ids {
		m[id] = i < len(r) && r[i] == 1
	}
	return m, nil
}
