package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/crawl-project/crawl/frontier"
	"github.com/redis/go-redis/v9"
)

// Add queues the entries not seen before and reports how many it queued. Entries of a
// partition this Store owns are checked against its seen-set and recorded at once; the others
// go to their partition's inbox, where its owner does the same (Drain), and are not counted.
// A repeated Add is harmless.
func (s *Store) Add(ctx context.Context, entries []frontier.Entry) (int, error) {
	hosts := make([]string, len(entries))
	for i, e := range entries {
		hosts[i] = e.Host
	}
	parts, err := s.partitionsOf(ctx, hosts, 0)
	if err != nil {
		return 0, err
	}
	byPart := make(map[int][]seenWrite)
	for _, e := range entries {
		p := parts[e.Host]
		byPart[p] = append(byPart[p], seenWrite{entry: e, state: seenQueued})
	}
	return s.addAll(ctx, byPart)
}

// Exclude records the exclusions whose URLs were not seen before, so they are never queued (at
// once in the partitions this Store owns, through the inbox in the others, as Add).
func (s *Store) Exclude(ctx context.Context, ex []frontier.Exclusion) error {
	hosts := make([]string, len(ex))
	for i, x := range ex {
		hosts[i] = x.Host
	}
	parts, err := s.partitionsOf(ctx, hosts, 0)
	if err != nil {
		return err
	}
	byPart := make(map[int][]seenWrite)
	for _, x := range ex {
		p := parts[x.Host]
		byPart[p] = append(byPart[p], seenWrite{entry: x.Entry, state: seenExcluded, reason: x.Reason})
	}
	_, err = s.addAll(ctx, byPart)
	return err
}

type seenWrite struct {
	entry  frontier.Entry
	state  string // seenQueued or seenExcluded
	reason string // excluded: why
}

// A seenWrite's state: what the scripts do with its URL when it is new (add_entries).
const (
	seenQueued   = "1" // queue it
	seenExcluded = "4" // record it as excluded
)

// addAll records ws in each partition of byPart this Store owns (record) and delivers the
// others to their partitions' inboxes; it reports how many it queued.
func (s *Store) addAll(ctx context.Context, byPart map[int][]seenWrite) (int, error) {
	if err := s.markActive(ctx, slices.Collect(maps.Keys(byPart))); err != nil {
		return 0, err
	}
	added := 0
	others := map[int][]seenWrite{}
	for p, ws := range byPart {
		o, ok := s.ownsSeen(p)
		if !ok {
			others[p] = ws
			continue
		}
		n, err := s.record(ctx, o, ws, 0, nil)
		if errors.Is(err, ErrFenced) {
			others[p] = ws // no longer this Store's: its new owner checks them
			continue
		}
		if err != nil {
			return added, fmt.Errorf("fleet: add: %w", err)
		}
		added += n
	}
	if err := s.deliver(ctx, others, false); err != nil {
		return added, fmt.Errorf("fleet: add: %w", err)
	}
	return added, nil
}

// inboxChunk bounds the entries of one inbox payload.
const inboxChunk = 512

// deliver appends ws to the inbox of each partition of byPart, as payloads of at most
// inboxChunk entries, one script per partition pipelined per node; with replicated, it then
// waits until each node's replicas have the writes (WAIT), so that a master that fails over
// right after cannot lose them: Forward trims an outbox only after that.
func (s *Store) deliver(ctx context.Context, byPart map[int][]seenWrite, replicated bool) error {
	groups := map[*redis.Client][]*scriptCall{}
	for p, ws := range byPart {
		c := &scriptCall{script: deliverScript, part: p, keys: []string{s.k.inbox(p), s.k.counts(p)}}
		for i := 0; i < len(ws); i += inboxChunk {
			var pl outboxPayload
			for _, w := range ws[i:min(i+inboxChunk, len(ws))] {
				if w.state == seenExcluded {
					pl.Excluded = append(pl.Excluded, frontier.Exclusion{Entry: w.entry, Reason: w.reason})
				} else {
					pl.Links = append(pl.Links, w.entry)
				}
			}
			b, err := json.Marshal(pl)
			if err != nil {
				return fmt.Errorf("encode links: %w", err)
			}
			c.args = append(c.args, string(b))
		}
		if len(c.args) == 0 {
			continue
		}
		node, err := s.nodeOf(ctx, c.keys[0])
		if err != nil {
			return fmt.Errorf("deliver to partition %d: %w", p, err)
		}
		groups[node] = append(groups[node], c)
	}
	for node, calls := range groups {
		if err := s.runOnNode(ctx, node, calls, replicated); err != nil {
			return err
		}
		for _, c := range calls {
			if err := c.cmd.Err(); err != nil {
				return fmt.Errorf("deliver to partition %d: %w", c.part, err)
			}
		}
	}
	return nil
}

// record checks ws, entries of o's partition, against the partition's seen-set and records
// those not seen before (queued, or excluded) with their fingerprints in one fenced script,
// which also drops the inbox's first trim payloads, keeping bad (unreadable ones among them) in
// the partition's bad list. It reports how many it queued.
func (s *Store) record(ctx context.Context, o Ownership, ws []seenWrite, trim int, bad []any) (int, error) {
	p := o.Partition
	ss, err := s.seenOf(ctx, o)
	if err != nil {
		return 0, err
	}
	packed, fresh := ss.freshWrites(nil, ws)
	if len(packed) == 0 && trim == 0 {
		s.seenDone(p, ss, nil, nil)
		return 0, nil
	}
	keys := []string{s.k.owner(p), s.k.hosts(p), s.k.counts(p), s.k.used(p), s.k.seenLog(p), s.k.inbox(p), s.k.bad(p)}
	args := append([]any{o.token, max(s.opts.HostBudget, 0), string(packed), trim, len(bad)}, bad...)
	keys, args = s.appendWrites(keys, args, p, fresh)
	r, err := recordScript.Run(ctx, s.rdb, keys, args...).Int64Slice()
	err = scriptErr(err)
	s.seenDone(p, ss, packed, err)
	if err != nil {
		return 0, fmt.Errorf("fleet: record in partition %d: %w", p, err)
	}
	if len(r) == 0 {
		return 0, nil
	}
	return int(r[0]), nil
}

// drainBatch bounds the inbox payloads one Drain records.
const drainBatch = 32

// Drain records up to drainBatch payloads of o's partition's inbox (the URLs other workers
// sent it): those not in the partition's seen-set are queued (or excluded), and the payloads
// dropped, in one fenced script; a crash before it leaves them for the next owner. A payload
// that cannot be read, or names a host of another partition, is set aside in the partition's
// bad list. It reports how many URLs it queued.
func (s *Store) Drain(ctx context.Context, o Ownership) (int, error) {
	p := o.Partition
	raw, err := s.rdb.LRange(ctx, s.k.inbox(p), 0, drainBatch-1).Result()
	if err != nil || len(raw) == 0 {
		return 0, err
	}
	pls, bad, why, hosts := readPayloads(raw)
	parts, err := s.partitionsOf(ctx, hosts, placeWait)
	if errors.Is(err, errPlacing) {
		return 0, nil // names still being looked up: the payloads wait for the next call
	}
	if err != nil {
		return 0, err
	}
	var ws []seenWrite
	var aside []any
	for i, pl := range pls {
		if !bad[i] {
			for _, x := range pl.Excluded {
				bad[i] = bad[i] || parts[x.Host] != p
			}
			for _, e := range pl.Links {
				bad[i] = bad[i] || parts[e.Host] != p
			}
			if bad[i] {
				why = append(why, fmt.Errorf("%w: inbox payload (%d bytes %q) names a host of another partition", errBadItem, len(raw[i]), clip(raw[i])))
			}
		}
		if bad[i] {
			aside = append(aside, raw[i])
			continue
		}
		ws = pl.writes(ws)
	}
	n, err := s.record(ctx, o, ws, len(raw), aside)
	if err != nil {
		return 0, err
	}
	if fn := s.asideFn.Load(); fn != nil {
		for _, err := range why {
			(*fn)(asideNote{From: s.k.inbox(p), List: s.k.bad(p), Err: err})
		}
	}
	return n, nil
}

// ownLink reports whether a link to host, found on a page of partition p, is p's to queue in
// Complete: its partition is known without asking Redis (by name, or by address once placed)
// and is p. Any other link goes to the outbox, for Forward to place.
func (s *Store) ownLink(p int, host string) bool {
	q, ok := s.knownPartition(host)
	return ok && q == p
}

// appendWrites appends the keys and arguments of add_entries (scripts.go) for ws, new entries
// of partition p: one group per host, state and reason, in the order of their first entries,
// each with its entries in their order.
func (s *Store) appendWrites(keys []string, args []any, p int, ws []seenWrite) ([]string, []any) {
	type groupKey struct{ host, state, reason string }
	var order []groupKey
	groups := map[groupKey][]seenWrite{}
	for _, w := range ws {
		g := groupKey{w.entry.Host, w.state, w.reason}
		if w.state != seenExcluded {
			g.reason = ""
		}
		if _, ok := groups[g]; !ok {
			order = append(order, g)
		}
		groups[g] = append(groups[g], w)
	}
	for _, g := range order {
		gw := groups[g]
		keys = append(keys, s.k.queue(p, g.host))
		args = append(args, g.host, g.state, g.reason, len(gw))
		if g.state == seenQueued {
			for _, w := range gw {
				args = append(args, itemOf(w.entry, 0).encode())
			}
		}
	}
	return keys, args
}

// scriptCall is one script run of a pipeline on one node.
type scriptCall struct {
	script *redis.Script
	part   int // the partition it writes
	keys   []string
	args   []any
	cmd    *redis.Cmd
}

// nodeOf is the client of the node serving key: the single-node client itself, or a
// cluster's master for key's slot.
func (s *Store) nodeOf(ctx context.Context, key string) (*redis.Client, error) {
	switch c := s.rdb.(type) {
	case *redis.Client:
		return c, nil
	case *redis.ClusterClient:
		return c.MasterForKey(ctx, key)
	}
	return nil, fmt.Errorf("fleet: unsupported Redis client %T", s.rdb)
}

// replicaWait bounds how long a replicated write waits for the node's replicas.
const replicaWait = time.Second

// errNotReplicated: fewer replicas than the node has acknowledged a write within replicaWait.
var errNotReplicated = errors.New("write not acknowledged by every replica in time")

// runOnNode runs calls on node in one pipeline (loading their scripts first if the node lacks
// them), then, with replicated and if the node has replicas, waits for them to acknowledge.
// A script's error reply is left in its cmd for the caller; any other failure is returned.
func (s *Store) runOnNode(ctx context.Context, node *redis.Client, calls []*scriptCall, replicated bool) error {
	want := 0
	if replicated {
		want = s.replicasOf(ctx, node)
	}
	for attempt := 0; ; attempt++ {
		pipe := node.Pipeline()
		for _, c := range calls {
			c.cmd = c.script.EvalSha(ctx, pipe, c.keys, c.args...)
		}
		var wait *redis.Cmd
		if want > 0 {
			wait = pipe.Do(ctx, "WAIT", want, replicaWait.Milliseconds())
		}
		_, err := pipe.Exec(ctx)
		if err != nil && attempt == 0 && redis.HasErrorPrefix(err, "NOSCRIPT") {
			for _, c := range calls {
				if err := c.script.Load(ctx, node).Err(); err != nil {
					return err
				}
			}
			continue
		}
		if err != nil && !repliesOnly(calls, wait) {
			return err
		}
		if wait == nil {
			return nil
		}
		if n, _ := wait.Int(); n < want {
			return fmt.Errorf("%s: %w (%d of %d)", node.Options().Addr, errNotReplicated, n, want)
		}
		return nil
	}
}

// repliesOnly reports whether every call that failed got an error reply from its script (which
// the caller reads from its cmd), and wait, if any, did not fail.
func repliesOnly(calls []*scriptCall, wait *redis.Cmd) bool {
	if wait != nil && wait.Err() != nil {
		return false
	}
	for _, c := range calls {
		var re redis.Error
		if err := c.cmd.Err(); err != nil && !errors.As(err, &re) {
			return false
		}
	}
	return true
}

// replicasOf is how many replicas the master node has online (its INFO replication, read
// at most every replicasEvery), on a cluster; 0 for a single node, whose replicas do not take
// over by themselves.
func (s *Store) replicasOf(ctx context.Context, node *redis.Client) int {
	if _, ok := s.rdb.(*redis.ClusterClient); !ok {
		return 0
	}
	addr := node.Options().Addr
	s.mu.Lock()
	r, known := s.replicas[addr]
	s.mu.Unlock()
	if known && time.Since(r.at) < replicasEvery {
		return r.n
	}
	info, err := node.Info(ctx, "replication").Result()
	if err != nil {
		return r.n // the last known figure
	}
	n := 0
	for _, line := range strings.Split(info, "\n") {
		if strings.HasPrefix(line, "slave") && strings.Contains(line, "state=online") {
			n++
		}
	}
	s.mu.Lock()
	if s.replicas == nil {
		s.replicas = map[string]replicaCount{}
	}
	s.replicas[addr] = replicaCount{n: n, at: time.Now()}
	s.mu.Unlock()
	return n
}

// replicaCount is a master's replicas online, read at a time.
type replicaCount struct {
	n  int
	at time.Time
}

// replicasEvery is how often a Store reads the cluster's replicas per master.
const replicasEvery = 5 * time.Second
