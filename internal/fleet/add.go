package fleet

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/crawl-project/crawl/frontier"
	"github.com/redis/go-redis/v9"
)

// Add queues the entries not seen before (any worker may add to any partition) and reports how
// many it queued. Each partition's share is one script; the seen-set makes a repeated Add
// harmless.
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

// Exclude records the exclusions whose URLs were not seen before, so they are never queued.
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

func (s *Store) addAll(ctx context.Context, byPart map[int][]seenWrite) (int, error) {
	return s.addDurable(ctx, byPart, false)
}

// addDurable is addAll, one script per partition pipelined per node; with replicated, it then
// waits until each node's replicas have the writes (WAIT), so that a master that fails over
// right after cannot lose them: Forward trims an outbox only after that. The partitions'
// seen-set headers are read first (other workers write to them between two adds of this
// one); a partition whose script found its header other than read (seenAnswer), having
// written nothing, is run again.
func (s *Store) addDurable(ctx context.Context, byPart map[int][]seenWrite, replicated bool) (int, error) {
	if err := s.markActive(ctx, slices.Collect(maps.Keys(byPart))); err != nil {
		return 0, err
	}
	if err := s.readSeenViews(ctx, slices.Collect(maps.Keys(byPart))); err != nil {
		return 0, fmt.Errorf("fleet: add: %w", err)
	}
	pending := maps.Clone(byPart)
	added := 0
	for attempt := 0; len(pending) > 0; attempt++ {
		if attempt == seenAttempts {
			return added, fmt.Errorf("fleet: add: %w", errSeenRace)
		}
		groups := map[*redis.Client][]*scriptCall{}
		for p, ws := range pending {
			c := &scriptCall{script: addScript, part: p, keys: []string{s.k.hosts(p), s.k.counts(p), s.k.used(p), s.k.seen(p)}}
			c.args = append(make([]any, 0, 4+2*len(ws)), max(s.opts.HostBudget, 0))
			c.keys, c.args = s.appendSeenBlock(c.keys, c.args, p, s.seenViewOf(p), writeHashes(ws))
			c.keys, c.args = s.appendWrites(c.keys, c.args, p, ws)
			node, err := s.nodeOf(ctx, c.keys[0])
			if err != nil {
				return added, fmt.Errorf("fleet: add to partition %d: %w", p, err)
			}
			groups[node] = append(groups[node], c)
		}
		for node, calls := range groups {
			if err := s.runOnNode(ctx, node, calls, replicated); err != nil {
				return added, fmt.Errorf("fleet: add: %w", err)
			}
			for _, c := range calls {
				r, err := c.cmd.Int64Slice()
				if err != nil {
					if again, err := s.seenAgain(ctx, c.part, err); !again {
						return added, fmt.Errorf("fleet: add to partition %d: %w", c.part, err)
					}
					continue
				}
				s.seenFitted(c.part)
				if len(r) >= 4 {
					if v, ok := seenViewFrom(r[2], r[3]); ok {
						s.setSeenView(c.part, v)
					}
				}
				if len(r) > 0 {
					added += int(r[0])
				}
				delete(pending, c.part)
			}
		}
	}
	return added, nil
}

// writeHashes is the seenHash of each write's URL.
func writeHashes(ws []seenWrite) []uint64 {
	hs := make([]uint64, len(ws))
	for i, w := range ws {
		hs[i] = seenHash(Fingerprint(w.entry.URL))
	}
	return hs
}

// seenAgain handles the error err of a script with a seen block for partition p: a stale view
// is replaced by the header the script found, a damaged header is recounted (repairSeen), and
// again says the script may be run again; any other error is returned as it is.
func (s *Store) seenAgain(ctx context.Context, p int, err error) (again bool, _ error) {
	switch what, v := seenAnswerOf(err); what {
	case seenStale:
		s.setSeenView(p, v)
		s.seenWiden(p)
		return true, nil
	case seenDamaged:
		if err := s.repairSeen(ctx, p); err != nil {
			return false, err
		}
		s.setSeenView(p, seenView{n: 1}) // the next run says what the repair wrote
		return true, nil
	}
	return false, err
}

// ownLink reports whether a link to host, found on a page of partition p, is p's to queue in
// Complete: its partition is known without asking Redis (by name, or by address once placed)
// and is p. Any other link goes to the outbox, for Forward to place.
func (s *Store) ownLink(p int, host string) bool {
	q, ok := s.knownPartition(host)
	return ok && q == p
}

// appendWrites appends the keys and arguments of add_entries (scripts.go) for ws, entries of
// partition p: one group per host, state and reason, in the order of their first entries,
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
		hs := make([]byte, 0, 4*len(gw))
		ms := make([]any, len(gw))
		for i, w := range gw {
			fp := Fingerprint(w.entry.URL)
			hs = binary.LittleEndian.AppendUint32(hs, uint32(seenHash(fp)))
			ms[i] = seenMember(fp)
		}
		args = append(append(args, g.host, g.state, g.reason, len(gw), string(hs)), ms...)
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
