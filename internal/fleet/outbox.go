package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/crawl-project/crawl/frontier"
)

// outboxPayload is what a completed page hands to other partitions: its links and the links
// it excluded, forwarded by the partition's owner (Forward).
type outboxPayload struct {
	Links    []frontier.Entry     `json:"l,omitempty"`
	Excluded []frontier.Exclusion `json:"x,omitempty"`
}

// forwardBatch bounds how many outbox payloads one Forward call delivers.
const forwardBatch = 64

// Forward delivers up to forwardBatch payloads of o's partition's outbox (the links of
// completed pages) to their partitions' inboxes, then drops them from the outbox. A crash
// between the two delivers them again, which the owners' seen-sets make harmless. It reports
// how many URLs it delivered.
func (s *Store) Forward(ctx context.Context, o Ownership) (int, error) {
	p := o.Partition
	raw, err := s.rdb.LRange(ctx, s.k.outbox(p), 0, forwardBatch-1).Result()
	if err != nil || len(raw) == 0 {
		return 0, err
	}
	pls, unread, why, hosts := readPayloads(raw)
	var bad []any // payloads that cannot be read: set aside by the trim
	for i, r := range raw {
		if unread[i] {
			bad = append(bad, r)
		}
	}
	parts, err := s.partitionsOf(ctx, hosts, placeWait)
	if errors.Is(err, errPlacing) {
		return 0, nil // names still being looked up: the payloads wait for the next call
	}
	if err != nil {
		return 0, err
	}
	byPart := make(map[int][]seenWrite)
	n := 0
	for i, pl := range pls {
		if unread[i] {
			continue
		}
		for _, w := range pl.writes(nil) {
			q := parts[w.entry.Host]
			byPart[q] = append(byPart[q], w)
			n++
		}
	}
	if err := s.markActive(ctx, slices.Collect(maps.Keys(byPart))); err != nil {
		return 0, err
	}
	if err := s.deliver(ctx, byPart, true); err != nil {
		return 0, fmt.Errorf("fleet: forward: %w", err)
	}
	err = trimScript.Run(ctx, s.rdb, []string{s.k.owner(p), s.k.outbox(p), s.k.counts(p), s.k.bad(p)},
		append([]any{o.token, len(raw)}, bad...)...).Err()
	if err = scriptErr(err); err != nil {
		return 0, fmt.Errorf("fleet: trim outbox of partition %d: %w", p, err)
	}
	if fn := s.asideFn.Load(); fn != nil {
		for _, err := range why {
			(*fn)(asideNote{From: s.k.outbox(p), List: s.k.bad(p), Err: err})
		}
	}
	return n, nil
}

// readPayloads reads raw payloads (readPayload): pls[i] is raw[i]'s unless unread[i] (why
// holds the errors of those), and hosts are the hosts the read ones name.
func readPayloads(raw []string) (pls []outboxPayload, unread []bool, why []error, hosts []string) {
	pls, unread = make([]outboxPayload, len(raw)), make([]bool, len(raw))
	for i, r := range raw {
		pl, err := readPayload(r)
		if err != nil {
			unread[i], why = true, append(why, err)
			continue
		}
		pls[i] = pl
		for _, x := range pl.Excluded {
			hosts = append(hosts, x.Host)
		}
		for _, e := range pl.Links {
			hosts = append(hosts, e.Host)
		}
	}
	return pls, unread, why, hosts
}

// writes appends to ws the seen-set writes of pl's URLs: its exclusions, then its links.
func (pl outboxPayload) writes(ws []seenWrite) []seenWrite {
	for _, x := range pl.Excluded {
		ws = append(ws, seenWrite{entry: x.Entry, state: seenExcluded, reason: x.Reason})
	}
	for _, e := range pl.Links {
		ws = append(ws, seenWrite{entry: e, state: seenQueued})
	}
	return ws
}

// readPayload decodes an outbox payload; one that is not JSON, or names a link without a URL
// or a host (an exclusion may have none), or a depth or hops out of bounds, is refused whole.
func readPayload(r string) (outboxPayload, error) {
	var pl outboxPayload
	if err := json.Unmarshal([]byte(r), &pl); err != nil {
		return pl, fmt.Errorf("%w: outbox payload (%d bytes %q): %v", errBadItem, len(r), clip(r), err)
	}
	check := func(e frontier.Entry, hostless bool) error {
		if e.URL == "" || e.Host == "" && !hostless || e.Depth < 0 || e.Depth > maxItemInt || e.Hops < 0 || e.Hops > maxItemInt {
			return fmt.Errorf("%w: outbox payload (%d bytes %q): entry %q of host %q, depth %d, hops %d", errBadItem, len(r), clip(r), clip(e.URL), clip(e.Host), e.Depth, e.Hops)
		}
		return nil
	}
	for _, e := range pl.Links {
		if err := check(e, false); err != nil {
			return pl, err
		}
	}
	for _, x := range pl.Excluded {
		if err := check(x.Entry, true); err != nil { // a mailto: link has no host
			return pl, err
		}
	}
	return pl, nil
}
