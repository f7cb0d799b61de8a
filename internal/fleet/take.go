package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/crawl-project/crawl/frontier"
)

// Lease is a URL handed to the owner of its partition. It is in the partition's in-flight set
// until Complete, or until a later owner returns it to its queue.
type Lease struct {
	frontier.Lease
	Partition int
	Deadline  time.Time // on Redis' clock: a later owner returns the URL to its queue
	member    string    // the in-flight set's member
}

// Hosts lists the hosts of o's partition that have URLs queued or delayed.
func (s *Store) Hosts(ctx context.Context, o Ownership) ([]string, error) {
	return s.rdb.SMembers(ctx, s.k.hosts(o.Partition)).Result()
}

// Take leases the next URL of host (in o's partition). ok is false when none is ready; then
// next is when the host's earliest retry is due (zero if it has none), on Redis' clock.
func (s *Store) Take(ctx context.Context, o Ownership, host string) (l Lease, ok bool, next time.Time, err error) {
	ls, next, err := s.TakeN(ctx, o, host, 1)
	if err != nil || len(ls) == 0 {
		return l, false, next, err
	}
	return ls[0], true, next, nil
}

// TakeN leases up to n of host's next URLs (in o's partition), in queue order, in one script.
// With none ready, next is when the host's earliest retry is due (zero if it has none), on
// Redis' clock.
func (s *Store) TakeN(ctx context.Context, o Ownership, host string, n int) (ls []Lease, next time.Time, err error) {
	p := o.Partition
	if q, ok := s.knownPartition(host); ok && q != p {
		return nil, next, fmt.Errorf("%w: %q is in %d, not %d", ErrWrongPartition, host, q, p)
	}
	ks := []string{s.k.owner(p), s.k.queue(p, host), s.k.delayed(p, host), s.k.inflight(p), s.k.hosts(p), s.k.counts(p)}
	prefix := inFlightPrefix(host)
	r, err := leaseScript.Run(ctx, s.rdb, ks, o.token, host, s.opts.URLLeaseTTL.Milliseconds(), max(n, 1), prefix).Slice()
	if err = scriptErr(err); err != nil {
		return nil, next, fmt.Errorf("fleet: lease from %q: %w", host, err)
	}
	at, _ := r[0].(int64)
	if len(r) == 2 {
		if at >= 0 {
			next = time.UnixMilli(at)
		}
		return nil, next, nil
	}
	var bad []aside
	for _, m := range r[2:] {
		enc, _ := m.(string)
		it, err := decodeItem(host, enc)
		if err != nil { // in flight now: set aside below, the others leased
			bad = append(bad, aside{member: prefix + enc, from: s.k.queue(p, host), err: err})
			continue
		}
		ls = append(ls, Lease{
			Lease:     frontier.Lease{Entry: it.entry(), Attempts: it.Attempts},
			Partition: p,
			Deadline:  time.UnixMilli(at),
			member:    prefix + enc,
		})
	}
	if err := s.setAside(ctx, o, bad); err != nil && len(ls) == 0 {
		return nil, next, err // (with leases, what stays in flight is set aside by the next owner's Reclaim or returnOrphans)
	}
	return ls, next, nil
}

// Done is a leased URL's result, for CompleteBatch.
type Done struct {
	Lease  Lease
	Result frontier.Result
}

// Complete records the result of l (CompleteBatch of one). Errors: ErrFenced, ErrNotInFlight.
func (s *Store) Complete(ctx context.Context, o Ownership, l Lease, r frontier.Result) error {
	in, err := s.CompleteBatch(ctx, o, []Done{{l, r}})
	if err == nil && !in[0] {
		err = fmt.Errorf("fleet: complete %s: %w", l.URL, ErrNotInFlight)
	}
	return err
}

// CompleteBatch records the results of leases of o's partition in one script: each URL's
// state in the seen-set and the partition's counts, and the links and exclusions of the
// fetched pages: those of o's partition added to it at once (as Add and Exclude would), the
// others, as one payload, in the partition's outbox, which Forward delivers to their
// partitions. A Retry puts its URL in its host's delayed set until NotBefore (on Redis' clock)
// with one more attempt. Page bodies are not sent: the caller stores them locally first.
// inFlight[i] is false when ds[i]'s URL was no longer in flight (reclaimed), its result then
// not recorded. Errors: ErrFenced (nothing recorded).
func (s *Store) CompleteBatch(ctx context.Context, o Ownership, ds []Done) (inFlight []bool, err error) {
	p := o.Partition
	ks := make([]string, 0, 7+len(ds))
	ks = append(ks, s.k.owner(p), s.k.inflight(p), s.k.counts(p), s.k.outbox(p), s.k.hosts(p), s.k.used(p), s.k.seenLog(p))
	args := make([]any, 0, 5+6*len(ds))
	args = append(args, o.token, "", len(ds), max(s.opts.HostBudget, 0), "")
	var pl outboxPayload
	var here []seenWrite // links and exclusions of partition p
	var done []uint64    // fingerprints of the URLs completed, which the seen-set should hold
	for _, d := range ds {
		l, r := d.Lease, d.Result
		if l.Partition != p {
			return nil, fmt.Errorf("%w: lease of partition %d, ownership of %d", ErrWrongPartition, l.Partition, p)
		}
		var kind, retryItem string
		var notBefore int64
		switch r.Kind {
		case frontier.Fetched:
			kind = "f"
			for _, x := range r.Excluded {
				if s.ownLink(p, x.Host) {
					here = append(here, seenWrite{entry: x.Entry, state: seenExcluded, reason: x.Reason})
				} else {
					pl.Excluded = append(pl.Excluded, x)
				}
			}
			for _, e := range r.Links {
				if s.ownLink(p, e.Host) {
					here = append(here, seenWrite{entry: e, state: seenQueued})
				} else {
					pl.Links = append(pl.Links, e)
				}
			}
		case frontier.Failed:
			kind = "F"
		case frontier.Excluded:
			kind = "x"
		case frontier.Retry:
			kind = "r"
			retryItem = itemOf(l.Entry, l.Attempts+1).encode()
			if !r.NotBefore.IsZero() {
				notBefore = r.NotBefore.UnixMilli()
			}
		default:
			return nil, fmt.Errorf("fleet: complete %s: unknown result kind %v", l.URL, r.Kind)
		}
		if kind != "r" {
			done = append(done, Fingerprint(l.URL))
		}
		ks = append(ks, s.k.delayed(p, l.Host))
		args = append(args, l.member, kind, retryItem, notBefore, l.Host, r.Reason)
	}
	if len(pl.Links) > 0 || len(pl.Excluded) > 0 {
		b, err := json.Marshal(pl)
		if err != nil {
			return nil, fmt.Errorf("fleet: encode links: %w", err)
		}
		args[1] = string(b)
	}
	ss, err := s.seenOf(ctx, o)
	if err != nil {
		return nil, fmt.Errorf("fleet: complete %d results in partition %d: %w", len(ds), p, err)
	}
	// (a completed URL is in the seen-set unless it was queued by hand)
	packed, fresh := ss.freshWrites(done, here)
	args[4] = string(packed)
	ks, args = s.appendWrites(ks, args, p, fresh)
	r, err := completeScript.Run(ctx, s.rdb, ks, args...).Int64Slice()
	err = scriptErr(err)
	s.seenDone(p, ss, packed, err)
	if err != nil {
		return nil, fmt.Errorf("fleet: complete %d results in partition %d: %w", len(ds), p, err)
	}
	inFlight = make([]bool, len(ds))
	for i := range inFlight {
		inFlight[i] = i < len(r) && r[i] == 1
	}
	return inFlight, nil
}

// PutBack puts l back at the head of its host's queue unchanged (no attempt counted), for a
// URL taken but not fetched. Errors: ErrFenced, ErrNotInFlight.
func (s *Store) PutBack(ctx context.Context, o Ownership, l Lease) error {
	p := o.Partition
	if l.Partition != p {
		return fmt.Errorf("%w: lease of partition %d, ownership of %d", ErrWrongPartition, l.Partition, p)
	}
	ks := []string{s.k.owner(p), s.k.inflight(p), s.k.queue(p, l.Host), s.k.hosts(p), s.k.counts(p)}
	enc, ok := strings.CutPrefix(l.member, inFlightPrefix(l.Host))
	if !ok {
		return fmt.Errorf("fleet: put back %s: lease's in-flight member is not of host %q", l.URL, l.Host)
	}
	err := putBackScript.Run(ctx, s.rdb, ks, o.token, l.member, l.Host, enc).Err()
	if err = scriptErr(err); err != nil {
		return fmt.Errorf("fleet: put back %s: %w", l.URL, err)
	}
	return nil
}

// Reclaim returns every URL in o's partition's in-flight set to the head of its host's queue
// with one more attempt. A new owner calls it right after Acquire: every URL in flight then was
// leased by an earlier owner. It reports how many URLs it returned.
func (s *Store) Reclaim(ctx context.Context, o Ownership) (int, error) {
	p := o.Partition
	members, err := s.rdb.ZRange(ctx, s.k.inflight(p), 0, -1).Result()
	if err != nil || len(members) == 0 {
		return 0, err
	}
	ks := []string{s.k.owner(p), s.k.inflight(p), s.k.hosts(p), s.k.counts(p)}
	args := []any{o.token}
	var bad []aside
	for _, m := range members {
		it, _, err := decodeMember(m)
		if err != nil {
			bad = append(bad, aside{member: m, from: s.k.inflight(p), err: err})
			continue
		}
		ks = append(ks, s.k.queue(p, it.Host))
		next := it
		next.Attempts++
		args = append(args, m, next.encode(), it.Host)
	}
	if err := s.setAside(ctx, o, bad); err != nil {
		return 0, fmt.Errorf("fleet: reclaim partition %d: %w", p, err)
	}
	if len(ks) == 4 {
		return 0, nil
	}
	n, err := reclaimScript.Run(ctx, s.rdb, ks, args...).Int()
	if err = scriptErr(err); err != nil {
		return 0, fmt.Errorf("fleet: reclaim partition %d: %w", p, err)
	}
	return n, nil
}
