package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/crawl-project/crawl/frontier"
	"github.com/redis/go-redis/v9"
)

// Options configure a Store; nil means the defaults. Partitions is fixed when a crawl is first
// opened and must agree for every worker (Open checks).
type Options struct {
	Partitions  int           // host partitions per crawl (default 1024)
	LeaseTTL    time.Duration // partition lease (default 10 s)
	URLLeaseTTL time.Duration // in-flight deadline of a leased URL (default 5 min)
	// HostBudget, if positive, caps the URLs of one host ever queued, as frontier.Options'
	// does: further unseen URLs of the host are excluded (frontier.ReasonLimit). It is each
	// worker's own; give every worker of a crawl the same from its start.
	HostBudget int
	// HostStateTTL is how long a host's saved politeness state outlives its last save
	// (default 30 days): a host not crawled for that long starts afresh, and its state stops
	// taking memory.
	HostStateTTL time.Duration
	// RobotsTTL is how long a host's robots.txt, shared through Redis, outlives its last
	// save: the crawl's --robots-ttl, after which no worker trusts it (default HostStateTTL).
	RobotsTTL time.Duration
	// Placement chooses each host's partition (ByName, or ByAddress for the crawler's
	// --key-by-ip); fixed when the crawl is created.
	Placement Placement
	// Resolve looks names up for ByAddress: the crawl's own resolver, so that placements agree
	// with the addresses it dials (nil: the system resolver).
	Resolve func(ctx context.Context, name string) ([]netip.Addr, error)
}

func (o *Options) withDefaults() Options {
	var r Options
	if o != nil {
		r = *o
	}
	if r.Partitions <= 0 {
		r.Partitions = 1024
	}
	if r.LeaseTTL <= 0 {
		r.LeaseTTL = 10 * time.Second
	}
	if r.URLLeaseTTL <= 0 {
		r.URLLeaseTTL = 5 * time.Minute
	}
	if r.HostStateTTL <= 0 {
		r.HostStateTTL = 30 * 24 * time.Hour
	}
	if r.RobotsTTL <= 0 {
		r.RobotsTTL = r.HostStateTTL
	}
	return r
}

// Store is one worker's handle on a shared crawl in Redis. It is safe for concurrent use; it
// keeps no state of its own beyond its configuration (ownerships are values the caller holds).
type Store struct {
	rdb    redis.UniversalClient
	k      keys
	opts   Options
	worker string
	place  *placer // ByAddress placements; nil places by name

	mu       sync.Mutex
	active   map[int]bool            // partitions this Store saw in the crawl's active set (guarded by mu)
	replicas map[string]replicaCount // replicas online per master address (guarded by mu)
	runIDs   map[string]string       // run_id per master address, as last read (guarded by mu)

	asideFn atomic.Pointer[func(asideNote)] // told of each value set aside (watchSetAside)
}

// Lease is a URL handed to the owner of its partition. It is in the partition's in-flight set
// until Complete, or until a later owner returns it to its queue.
type Lease struct {
	frontier.Lease
	Partition int
	Deadline  time.Time // on Redis' clock: a later owner returns the URL to its queue
	member    string    // the in-flight set's member
}

// outboxPayload is what a completed page hands to other partitions: its links and the links
// it excluded, forwarded by the partition's owner (Forward).
type outboxPayload struct {
	Links    []frontier.Entry     `json:"l,omitempty"`
	Excluded []frontier.Exclusion `json:"x,omitempty"`
}

// Open joins crawl (created with opts' partitions if it does not exist) as worker (an id unique
// in the fleet, e.g. host name and PID). It fails with ErrConfigMismatch when the crawl exists
// with another number of partitions or was made by a version that stored it otherwise, and
// with ErrServerTooOld, naming the node and its version, on a Redis older than 6.2.
func Open(ctx context.Context, rdb redis.UniversalClient, crawl, worker string, opts *Options) (*Store, error) {
	if err := validName(crawl); err != nil {
		return nil, err
	}
	if worker == "" || strings.ContainsAny(worker, "\r\n") {
		return nil, fmt.Errorf("fleet: invalid worker id %q", worker)
	}
	o := opts.withDefaults()
	if o.Partitions > MaxPartitions {
		return nil, fmt.Errorf("fleet: %d partitions: at most %d", o.Partitions, MaxPartitions)
	}
	if o.LeaseTTL > MaxLeaseTTL {
		return nil, fmt.Errorf("fleet: lease TTL %v: at most %v", o.LeaseTTL, MaxLeaseTTL)
	}
	s := &Store{rdb: rdb, k: keys{crawl: crawl}, opts: o, worker: worker}
	if err := s.checkServers(ctx); err != nil {
		return nil, err
	}
	if o.Placement == ByAddress {
		s.place = newPlacer(rdb, s.k, o.Partitions, o.Resolve)
	}
	want := configOf(o.Partitions) + o.Placement.configSuffix()
	if err := rdb.SetNX(ctx, s.k.config(), want, 0).Err(); err != nil {
		return nil, fmt.Errorf("fleet: open crawl %q: %w", crawl, err)
	}
	got, err := rdb.Get(ctx, s.k.config()).Result()
	if err != nil {
		return nil, fmt.Errorf("fleet: open crawl %q: %w", crawl, err)
	}
	if _, err := parseConfig(crawl, got); err != nil {
		return nil, err
	}
	if crawlPlace := placementOf(got); crawlPlace != o.Placement {
		return nil, fmt.Errorf("%w: crawl %q places hosts by %s, this worker by %s (crawl run --key-by-ip places by address: give it to every worker or none)",
			ErrConfigMismatch, crawl, crawlPlace, o.Placement)
	}
	if got != want {
		return nil, fmt.Errorf("%w: crawl %q has %s, this worker %s", ErrConfigMismatch, crawl, got, want)
	}
	return s, nil
}

// configLayout names how this version stores a crawl: the seen-set as one hash of buckets,
// queue items in the binary item encoding (docs/fleet.md "Crawls of earlier versions").
const configLayout = "seen=hash items=bin1 active-set"

// configOf is the configuration a crawl of partitions partitions records at its creation.
func configOf(partitions int) string {
	return fmt.Sprintf("partitions=%d %s", partitions, configLayout)
}

// parseConfig returns the partitions of crawl's recorded configuration cfg (configOf, then its
// placement's suffix, read by placementOf). A crawl made by an earlier version (fixed seen-set
// buckets, JSON queue items) is refused with ErrConfigMismatch, saying so.
// The partitions must be 1 to MaxPartitions: a configuration saying more (damaged or hostile)
// is refused with an error naming the key, before anything is allocated by it.
func parseConfig(crawl, cfg string) (partitions int, err error) {
	key := keys{crawl: crawl}.config()
	first, rest, _ := strings.Cut(cfg, " ")
	n, ok, err := configInt(key, first, "partitions", 1, MaxPartitions)
	if err != nil {
		return 0, fmt.Errorf("crawl %q: %w", crawl, err)
	}
	if !ok {
		return 0, badValue(key, "", cfg, "partitions=P first")
	}
	partitions = int(n)
	if rest = strings.TrimSuffix(rest, ByAddress.configSuffix()); rest != configLayout {
		return 0, fmt.Errorf("%w: crawl %q was stored by another version of crawl (%q; this one stores %q: "+
			"a seen-set of hashed buckets and binary queue items): finish it with the version that started it, or start a new crawl (--crawl NAME)",
			ErrConfigMismatch, crawl, cfg, configOf(partitions))
	}
	return partitions, nil
}

// Partitions is the number of host partitions of the crawl.
func (s *Store) Partitions() int { return s.opts.Partitions }

// Now is Redis' clock: the time every comparison between workers uses.
func (s *Store) Now(ctx context.Context) (time.Time, error) {
	return s.rdb.Time(ctx).Result()
}

// scriptErr maps the scripts' error replies to the package's sentinel errors (Redis 7 puts
// "ERR " before an error_reply without a code; older servers and Valkey may not).
func scriptErr(err error) error {
	if err == nil {
		return nil
	}
	switch strings.TrimPrefix(err.Error(), "ERR ") {
	case "FENCED":
		return ErrFenced
	case "NOTINFLIGHT":
		return ErrNotInFlight
	}
	return err
}

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

func (s *Store) addAll(ctx context.Context, byPart map[int][]seenWrite) (int, error) {
	return s.addDurable(ctx, byPart, false)
}

// addDurable is addAll, one script per partition pipelined per node; with replicated, it then
// waits until each node's replicas have the writes (WAIT), so that a master that fails over
// right after cannot lose them: Forward trims an outbox only after that.
func (s *Store) addDurable(ctx context.Context, byPart map[int][]seenWrite, replicated bool) (int, error) {
	if err := s.markActive(ctx, slices.Collect(maps.Keys(byPart))); err != nil {
		return 0, err
	}
	groups := map[*redis.Client][]*scriptCall{}
	for p, ws := range byPart {
		c := &scriptCall{script: addScript, keys: []string{s.k.hosts(p), s.k.counts(p), s.k.used(p), s.k.seen(p)}}
		c.args = append(make([]any, 0, 1+5*len(ws)), max(s.opts.HostBudget, 0))
		c.keys, c.args = s.appendWrites(c.keys, c.args, p, ws)
		node, err := s.nodeOf(ctx, c.keys[0])
		if err != nil {
			return 0, fmt.Errorf("fleet: add to partition %d: %w", p, err)
		}
		groups[node] = append(groups[node], c)
	}
	added := 0
	for node, calls := range groups {
		if err := s.runOnNode(ctx, node, calls, replicated); err != nil {
			return added, fmt.Errorf("fleet: add: %w", err)
		}
		for _, c := range calls {
			r, _ := c.cmd.Int64Slice()
			if len(r) > 0 {
				added += int(r[0])
			}
		}
	}
	return added, nil
}

// ownLink reports whether a link to host, found on a page of partition p, is p's to queue in
// Complete: its partition is known without asking Redis (by name, or by address once placed)
// and is p. Any other link goes to the outbox, for Forward to place.
func (s *Store) ownLink(p int, host string) bool {
	q, ok := s.knownPartition(host)
	return ok && q == p
}

// appendWrites appends the keys and arguments of add_entries (scripts.go) for ws, entries of
// partition p.
func (s *Store) appendWrites(keys []string, args []any, p int, ws []seenWrite) ([]string, []any) {
	for _, w := range ws {
		keys = append(keys, s.k.queue(p, w.entry.Host))
		args = append(args, seenFP(Fingerprint(w.entry.URL)), w.state, w.entry.Host, itemOf(w.entry, 0).encode(), w.reason)
	}
	return keys, args
}

// scriptCall is one script run of a pipeline on one node.
type scriptCall struct {
	script *redis.Script
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
		if err != nil {
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
	ks = append(ks, s.k.owner(p), s.k.inflight(p), s.k.counts(p), s.k.outbox(p), s.k.hosts(p), s.k.used(p), s.k.seen(p))
	args := make([]any, 0, 4+7*len(ds))
	args = append(args, o.token, "", len(ds), max(s.opts.HostBudget, 0))
	var pl outboxPayload
	var here []seenWrite // links and exclusions of partition p
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
		ks = append(ks, s.k.delayed(p, l.Host))
		args = append(args, l.member, seenFP(Fingerprint(l.URL)), kind, retryItem, notBefore, l.Host, r.Reason)
	}
	ks, args = s.appendWrites(ks, args, p, here)
	if len(pl.Links) > 0 || len(pl.Excluded) > 0 {
		b, err := json.Marshal(pl)
		if err != nil {
			return nil, fmt.Errorf("fleet: encode links: %w", err)
		}
		args[1] = string(b)
	}
	r, err := completeScript.Run(ctx, s.rdb, ks, args...).Int64Slice()
	if err = scriptErr(err); err != nil {
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

// forwardBatch bounds how many outbox payloads one Forward call delivers.
const forwardBatch = 64

// Forward delivers up to forwardBatch payloads of o's partition's outbox (the links of
// completed pages) to their partitions, then drops them from the outbox. A crash between the
// two delivers them again, which the seen-set makes harmless. It reports how many URLs were
// newly queued.
func (s *Store) Forward(ctx context.Context, o Ownership) (int, error) {
	p := o.Partition
	raw, err := s.rdb.LRange(ctx, s.k.outbox(p), 0, forwardBatch-1).Result()
	if err != nil || len(raw) == 0 {
		return 0, err
	}
	pls := make([]outboxPayload, 0, len(raw))
	var hosts []string
	var bad []any // payloads that cannot be read: set aside by the trim
	var why []error
	for _, r := range raw {
		pl, err := readPayload(r)
		if err != nil {
			bad, why = append(bad, r), append(why, err)
			continue
		}
		pls = append(pls, pl)
		i := len(pls) - 1
		for _, x := range pls[i].Excluded {
			hosts = append(hosts, x.Host)
		}
		for _, e := range pls[i].Links {
			hosts = append(hosts, e.Host)
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
	for _, pl := range pls {
		for _, x := range pl.Excluded {
			q := parts[x.Host]
			byPart[q] = append(byPart[q], seenWrite{entry: x.Entry, state: seenExcluded, reason: x.Reason})
		}
		for _, e := range pl.Links {
			q := parts[e.Host]
			byPart[q] = append(byPart[q], seenWrite{entry: e, state: seenQueued})
		}
	}
	added, err := s.addDurable(ctx, byPart, true)
	if err != nil {
		return added, err
	}
	err = trimScript.Run(ctx, s.rdb, []string{s.k.owner(p), s.k.outbox(p), s.k.counts(p), s.k.bad(p)},
		append([]any{o.token, len(raw)}, bad...)...).Err()
	if err = scriptErr(err); err != nil {
		return added, fmt.Errorf("fleet: trim outbox of partition %d: %w", p, err)
	}
	if fn := s.asideFn.Load(); fn != nil {
		for _, err := range why {
			(*fn)(asideNote{From: s.k.outbox(p), List: s.k.bad(p), Err: err})
		}
	}
	return added, nil
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

// Idle reports whether the whole crawl has nothing left to do: no URL queued, delayed or in
// flight, and no links waiting in an outbox, in any partition.
func (s *Store) Idle(ctx context.Context) (bool, error) {
	ps, err := s.PartitionCounts(ctx)
	return ps.Idle(), err
}

// Counts sums the partitions' counters (one transaction), with the failed and excluded URLs by
// reason.
func (s *Store) Counts(ctx context.Context) (frontier.Counts, error) {
	ps, err := s.PartitionCounts(ctx)
	return ps.Sum(), err
}

// PartCounts are the counters of one partition.
type PartCounts struct {
	frontier.Counts
	Outbox   int // payloads waiting for Forward
	Bad      int // unreadable values set aside in the partition's bad list
	Repaired int // damaged values the scripts or the owner's recount repaired
	// Damaged names the counters that are not integers in [0, maxCount] (read as 0): the
	// partition is not idle until its owner recounts them (Store.recount).
	Damaged []string
}

// Partitions are the counters of every partition, indexed by partition, read at one instant.
type Partitions []PartCounts

// Idle reports whether nothing is queued, delayed, in flight or in an outbox in any partition
// (and no partition's counters are damaged).
func (ps Partitions) Idle() bool {
	for _, p := range ps {
		if p.Queued != 0 || p.Outbox != 0 || len(p.Damaged) > 0 {
			return false
		}
	}
	return true
}

// Sum adds the partitions' counters up.
func (ps Partitions) Sum() frontier.Counts {
	c := frontier.Counts{FailedBy: map[string]int{}, ExcludedBy: map[string]int{}}
	for _, p := range ps {
		c.Queued += p.Queued
		c.Delayed += p.Delayed
		c.InFlight += p.InFlight
		c.Fetched += p.Fetched
		c.Failed += p.Failed
		c.Excluded += p.Excluded
		for r, n := range p.FailedBy {
			c.FailedBy[r] += n
		}
		for r, n := range p.ExcludedBy {
			c.ExcludedBy[r] += n
		}
	}
	return c
}

// markActive adds partitions ps to the crawl's active set before anything is written to
// them, so that the set holds every partition that may have work (a crash between the two
// leaves a partition listed with nothing in it, which costs a read). Each Store adds a
// partition once.
func (s *Store) markActive(ctx context.Context, ps []int) error {
	s.mu.Lock()
	var add []any
	for _, p := range ps {
		if !s.active[p] {
			add = append(add, p)
		}
	}
	s.mu.Unlock()
	if len(add) == 0 {
		return nil
	}
	if err := s.rdb.SAdd(ctx, s.k.active(), add...).Err(); err != nil {
		return fmt.Errorf("fleet: mark partitions active: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.active == nil {
		s.active = map[int]bool{}
	}
	for _, p := range add {
		s.active[p.(int)] = true
	}
	return nil
}

// activePartitions reads the crawl's active set: every partition that may have work.
func (s *Store) activePartitions(ctx context.Context) ([]int, error) {
	ms, err := s.rdb.SMembers(ctx, s.k.active()).Result()
	if err != nil {
		return nil, fmt.Errorf("fleet: read active partitions: %w", err)
	}
	ps := make([]int, 0, len(ms))
	for _, m := range ms {
		if p, err := strconv.Atoi(m); err == nil && p >= 0 && p < s.opts.Partitions {
			ps = append(ps, p)
		}
	}
	slices.Sort(ps)
	return ps, nil
}

// PartitionCounts reads every partition's counters, pipelined (on a cluster, one pipeline per
// node): those of the crawl's active set, the others being empty. The partitions are read one after another, so the totals are a near snapshot; but
// when they say the crawl is idle, they are read again until two reads agree, so that an idle
// answer is true of one instant: a Forward between two reads cannot hide the links it moves
// from one partition to another. (Nothing goes from busy to idle and back without changing a
// counter that only grows: fetched, failed or excluded.)
func (s *Store) PartitionCounts(ctx context.Context) (Partitions, error) {
	ps, err := s.readPartitionCounts(ctx)
	for range idleRereads {
		if err != nil || !ps.Idle() {
			return ps, err
		}
		again, err := s.readPartitionCounts(ctx)
		if err != nil {
			return nil, err
		}
		if reflect.DeepEqual(again, ps) {
			return ps, nil
		}
		ps = again
	}
	return nil, fmt.Errorf("fleet: read counts: still changing after %d reads", idleRereads)
}

// idleRereads bounds the reads of PartitionCounts' idle check.
const idleRereads = 8

func (s *Store) readPartitionCounts(ctx context.Context) (Partitions, error) {
	active, err := s.activePartitions(ctx)
	if err != nil {
		return nil, err
	}
	ps := make(Partitions, s.opts.Partitions)
	if len(active) == 0 {
		return ps, nil
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(active))
	for i, p := range active {
		cmds[i] = pipe.HGetAll(ctx, s.k.counts(p))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("fleet: read counts: %w", err)
	}
	for i, cmd := range cmds {
		c := &ps[active[i]]
		fields := map[string]*int{"queued": &c.Queued, "delayed": &c.Delayed, "inflight": &c.InFlight,
			"fetched": &c.Fetched, "failed": &c.Failed, "excluded": &c.Excluded, "outbox": &c.Outbox,
			"bad": &c.Bad, "repaired": &c.Repaired}
		key := s.k.counts(active[i])
		for name, v := range cmd.Val() {
			n, ok := countOf(key, name, v)
			if !ok {
				c.Damaged = append(c.Damaged, badValue(key, name, v, "a count").Error())
				continue
			}
			if f := fields[name]; f != nil {
				*f += n
			} else if reason, ok := strings.CutPrefix(name, "failed:"); ok && n != 0 {
				if c.FailedBy == nil {
					c.FailedBy = map[string]int{}
				}
				c.FailedBy[reasonName(reason)] += n
			} else if reason, ok := strings.CutPrefix(name, "excluded:"); ok && n != 0 {
				if c.ExcludedBy == nil {
					c.ExcludedBy = map[string]int{}
				}
				c.ExcludedBy[reasonName(reason)] += n
			}
		}
	}
	return ps, nil
}
