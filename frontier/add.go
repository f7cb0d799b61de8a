package frontier

import (
	"fmt"
	"strings"

	"go.etcd.io/bbolt"
)

// OverBudgetRecords is how many excluded URLs a host over its budget (Options.HostBudget) may
// have recorded, at least: past max(HostBudget, OverBudgetRecords) excluded URLs of any reason,
// its further over-budget URLs are counted (Counts.Dropped), not recorded, so that a host whose
// pages link to millions of URLs costs the store a bounded number of records.
const OverBudgetRecords = 1000

// enqueue records e as queued and appends it to its host's queue, unless it was seen before.
// Over the host budget, e is recorded as excluded (ReasonLimit) instead, or only counted as
// dropped once the host has OverBudgetRecords exclusions, and false is returned.
func (t *txn) enqueue(e Entry) (bool, error) {
	fp := sum(t.key, e.URL)
	if t.known(e.URL, fp) {
		return false, nil
	}
	if t.budget > 0 {
		c, err := t.counts(e.Host)
		if err != nil {
			return false, err
		}
		if c.Queued+c.Fetched+c.Failed >= t.budget {
			if c.Excluded >= max(t.budget, OverBudgetRecords) {
				t.d.dropped++
				return false, nil
			}
			_, err := t.exclude(Exclusion{Entry: e, Reason: ReasonLimit,
				Detail: fmt.Sprintf("host budget of %d URLs reached", t.budget)})
			return false, err
		}
	}
	id, err := t.hostID(e.Host)
	if err != nil {
		return false, err
	}
	qk, err := t.nextQueueKey(id)
	if err != nil {
		return false, err
	}
	if err := t.qPut(qk, fpQueueValue(fp)); err != nil {
		return false, err
	}
	ref, err := t.parentRef(e.Parent)
	if err != nil {
		return false, err
	}
	r := record{state: stQueued, depth: e.Depth, hops: e.Hops, qkey: qk, host: e.Host, hostID: id, url: e.URL, parent: e.Parent, parentRef: ref, role: e.Role}
	t.add(fp, r.encode4())
	t.d.host(e.Host).Queued++
	return true, nil
}

// exclude records x as excluded, unless its URL was seen before.
func (t *txn) exclude(x Exclusion) (bool, error) {
	fp := sum(t.key, x.URL)
	if t.known(x.URL, fp) {
		return false, nil
	}
	id, err := t.hostID(x.Host)
	if err != nil {
		return false, err
	}
	ref, err := t.parentRef(x.Parent)
	if err != nil {
		return false, err
	}
	r := record{state: stExcluded, depth: x.Depth, hops: x.Hops, host: x.Host, hostID: id, url: x.URL, parent: x.Parent, parentRef: ref, reason: x.Reason,
		detail: keptDetail(x.Detail), role: x.Role}
	t.add(fp, r.encode4())
	t.d.host(x.Host).Excluded++
	t.d.excludedBy[x.Reason]++
	return true, nil
}

func validEntry(e Entry) error {
	if e.URL == "" || e.Host == "" || len(e.Host) > maxHost || strings.IndexByte(e.Host, 0) >= 0 || e.Depth < 0 || e.Hops < 0 || e.Role > RoleRequisite {
		return fmt.Errorf("%w: entry URL %q host %q depth %d", ErrInvalid, e.URL, e.Host, e.Depth)
	}
	return nil
}

func validExclusion(x Exclusion) error {
	if x.URL == "" || len(x.Host) > maxHost || strings.IndexByte(x.Host, 0) >= 0 || x.Depth < 0 {
		return fmt.Errorf("%w: exclusion URL %q host %q depth %d", ErrInvalid, x.URL, x.Host, x.Depth)
	}
	if x.Reason == "" || strings.IndexByte(x.Reason, 0) >= 0 {
		return fmt.Errorf("%w: exclusion of %q without a reason", ErrInvalid, x.URL)
	}
	return nil
}

// Add enqueues the entries whose URLs were never seen, in order, in one transaction, and returns
// how many it enqueued. Duplicates within entries count once. Entries over Options.HostBudget
// are recorded as excluded (ReasonLimit) instead and not counted.
func (f *Frontier) Add(entries []Entry) (added int, err error) {
	for _, e := range entries {
		if err := validEntry(e); err != nil {
			return 0, err
		}
	}
	var d *delta
	c := f.claims()
	err = f.bolt.Update(func(tx *bbolt.Tx) error {
		c.reset()
		d, added = newDelta(), 0
		t := f.newTxn(tx, d)
		t.claims = c
		for _, e := range entries {
			ok, err := t.enqueue(e)
			if err != nil {
				return fmt.Errorf("%s: %w", e.URL, err)
			}
			if ok {
				added++
			}
		}
		if err := t.flush(); err != nil {
			return err
		}
		return d.write(tx)
	})
	c.done(err)
	if err != nil {
		return 0, fmt.Errorf("frontier: add: %w", err)
	}
	f.mu.Lock()
	f.apply(d)
	f.mu.Unlock()
	return added, nil
}

// Exclude records the URLs of ex that were never seen as excluded (seeds out of scope…), in one
// transaction.
func (f *Frontier) Exclude(ex []Exclusion) error {
	for _, x := range ex {
		if err := validExclusion(x); err != nil {
			return err
		}
	}
	var d *delta
	c := f.claims()
	err := f.bolt.Update(func(tx *bbolt.Tx) error {
		c.reset()
		d = newDelta()
		t := f.newTxn(tx, d)
		t.claims = c
		for _, x := range ex {
			if _, err := t.exclude(x); err != nil {
				return fmt.Errorf("%s: %w", x.URL, err)
			}
		}
		if err := t.flush(); err != nil {
			return err
		}
		return d.write(tx)
	})
	c.done(err)
	if err != nil {
		return fmt.Errorf("frontier: exclude: %w", err)
	}
	f.mu.Lock()
	f.apply(d)
	f.mu.Unlock()
	return nil
}
