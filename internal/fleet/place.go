package fleet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/crawl-project/crawl/internal/urlnorm"
	"github.com/redis/go-redis/v9"
)

// Placement is what chooses a host's partition, fixed when a crawl is created (Open checks
// every worker agrees).
type Placement int

const (
	// ByName puts a host key in PartitionOf(host key).
	ByName Placement = iota
	// ByAddress puts a host key in PartitionOf(its address key): the address its name
	// resolves to, with the host key's port (urlnorm.AddrKey, the gate key of the crawler's
	// --key-by-ip). The names one server answers for then fall to one partition, hence to one
	// owner, whose one gate paces them together. The first worker to place a host records its
	// address key in the crawl; that record holds for the crawl's life, whatever later lookups
	// say, so that a host's URLs never live in two partitions. A name that does not resolve is
	// placed (and recorded) by its own name; an IP literal by itself, without a record.
	ByAddress
)

func (p Placement) String() string {
	if p == ByAddress {
		return "address"
	}
	return "name"
}

// configSuffix is what a placement adds to a crawl's configuration string (none for ByName,
// so that crawls created before placements existed keep theirs).
func (p Placement) configSuffix() string {
	if p == ByAddress {
		return " place=address"
	}
	return ""
}

const (
	// maxPlaced bounds the placements a Store keeps in memory (about 100 bytes each); past
	// it an eighth are forgotten and read again from Redis when needed.
	maxPlaced = 1 << 17
	// placeLookupTimeout bounds one name's lookup for its placement.
	placeLookupTimeout = 10 * time.Second
	// placeWait is how long Forward waits for placements before leaving its payloads to the
	// next round (the lookups go on meanwhile), so that a slow name never holds a round up.
	placeWait = 200 * time.Millisecond
)

// errPlacing is returned while a host's placement is being looked up: try again later.
var errPlacing = errors.New("fleet: host placement being looked up")

// placer keeps a ByAddress crawl's placements: a bounded cache of the records in Redis and the
// lookups under way. It is safe for concurrent use.
type placer struct {
	rdb        redis.UniversalClient
	k          keys
	partitions int
	lookup     func(ctx context.Context, name string) ([]netip.Addr, error)

	mu      sync.Mutex
	known   map[string]int      // host key → partition (guarded by mu)
	pending map[string]*placing // lookups under way (guarded by mu)
}

// placing is one host's placement under way: done is closed when it has ended, with the
// host's partition p or the error err.
type placing struct {
	done chan struct{}
	p    int
	err  error
}

func newPlacer(rdb redis.UniversalClient, k keys, partitions int, lookup func(context.Context, string) ([]netip.Addr, error)) *placer {
	if lookup == nil {
		lookup = func(ctx context.Context, name string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", name)
		}
	}
	return &placer{rdb: rdb, k: k, partitions: partitions, lookup: lookup,
		known: map[string]int{}, pending: map[string]*placing{}}
}

// record is the key and field of host's placement record: a hash in the partition host's
// name hashes to, so records spread over the cluster's slots.
func (pl *placer) record(host string) (key, field string) {
	return pl.k.part(PartitionOf(host, pl.partitions), "place"), host
}

// cached returns host's partition if it is known without asking Redis.
func (pl *placer) cached(host string) (int, bool) {
	name, _ := urlnorm.SplitHostKey(host)
	if a, err := netip.ParseAddr(name); err == nil {
		return PartitionOf(urlnorm.AddrKey(host, []netip.Addr{a}), pl.partitions), true
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	p, ok := pl.known[host]
	return p, ok
}

// remember records host's partition in the cache, forgetting an eighth of it when full.
func (pl *placer) remember(host string, p int) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if _, ok := pl.known[host]; !ok && len(pl.known) >= maxPlaced {
		drop := maxPlaced / 8
		for h := range pl.known {
			delete(pl.known, h)
			if drop--; drop == 0 {
				break
			}
		}
	}
	pl.known[host] = p
}

// find returns host's partition from the cache or its record in Redis; ok is false when the
// host was never placed (it has no URL in the crawl).
func (pl *placer) find(ctx context.Context, host string) (p int, ok bool, err error) {
	if p, ok := pl.cached(host); ok {
		return p, true, nil
	}
	key, field := pl.record(host)
	v, err := pl.rdb.HGet(ctx, key, field).Result()
	if errors.Is(err, redis.Nil) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("fleet: read placement of %q: %w", host, err)
	}
	p = PartitionOf(v, pl.partitions)
	pl.remember(host, p)
	return p, true, nil
}

// place returns the partitions of hosts, placing (looking up and recording) those never
// placed. If lookups are still under way after wait (0: until ctx ends), it returns an error
// wrapping errPlacing; the lookups go on, and a later call finds their results.
func (pl *placer) place(ctx context.Context, hosts []string, wait time.Duration) (map[string]int, error) {
	out := make(map[string]int, len(hosts))
	var unknown []string
	asked := map[string]bool{}
	for _, h := range hosts {
		if asked[h] {
			continue
		}
		asked[h] = true
		if p, ok := pl.cached(h); ok {
			out[h] = p
		} else {
			unknown = append(unknown, h)
		}
	}
	if len(unknown) == 0 {
		return out, nil
	}
	// Most hosts were placed by another worker: read their records first, in one pipeline.
	pipe := pl.rdb.Pipeline()
	cmds := make([]*redis.StringCmd, len(unknown))
	for i, h := range unknown {
		key, field := pl.record(h)
		cmds[i] = pipe.HGet(ctx, key, field)
	}
	_, _ = pipe.Exec(ctx) // each command's error is read below
	var waits []*placing
	var waited []string
	for i, h := range unknown {
		v, err := cmds[i].Result()
		switch {
		case err == nil:
			p := PartitionOf(v, pl.partitions)
			pl.remember(h, p)
			out[h] = p
		case errors.Is(err, redis.Nil): // never placed
			waits = append(waits, pl.start(h))
			waited = append(waited, h)
		default:
			return nil, fmt.Errorf("fleet: read placement of %q: %w", h, err)
		}
	}
	if len(waits) == 0 {
		return out, nil
	}
	wctx := ctx
	if wait > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, wait)
		defer cancel()
	}
	for i, w := range waits {
		select {
		case <-w.done:
		case <-wctx.Done():
			return nil, fmt.Errorf("%w (%d hosts): %w", errPlacing, len(waits)-i, wctx.Err())
		}
		if w.err != nil {
			return nil, w.err
		}
		out[waited[i]] = w.p
	}
	return out, nil
}

// start starts placing host, unless that is under way or host was placed since the caller
// looked (a lookup that ended meanwhile), and returns its placing. The lookup has a context of
// its own: a caller that stops waiting does not cut it short.
func (pl *placer) start(host string) *placing {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if w := pl.pending[host]; w != nil {
		return w
	}
	if p, ok := pl.known[host]; ok { // settle remembers before it leaves pending
		w := &placing{done: make(chan struct{}), p: p}
		close(w.done)
		return w
	}
	w := &placing{done: make(chan struct{})}
	pl.pending[host] = w
	go func() {
		w.p, w.err = pl.settle(host)
		pl.mu.Lock()
		delete(pl.pending, host)
		pl.mu.Unlock()
		close(w.done)
	}()
	return w
}

// settle looks host up and records its address key unless another worker recorded one first,
// then caches and returns the partition of the key that holds.
func (pl *placer) settle(host string) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), placeLookupTimeout)
	defer cancel()
	name, _ := urlnorm.SplitHostKey(host)
	key := host // a name that does not resolve is placed by itself
	if addrs, err := pl.lookup(ctx, name); err == nil {
		key = urlnorm.AddrKey(host, addrs)
	}
	rctx, rcancel := context.WithTimeout(context.Background(), placeLookupTimeout)
	defer rcancel()
	rkey, field := pl.record(host)
	pipe := pl.rdb.TxPipeline()
	pipe.HSetNX(rctx, rkey, field, key)
	got := pipe.HGet(rctx, rkey, field)
	if _, err := pipe.Exec(rctx); err != nil {
		return 0, fmt.Errorf("fleet: record placement of %q: %w", host, err)
	}
	p := PartitionOf(got.Val(), pl.partitions)
	pl.remember(host, p)
	return p, nil
}

// partitionsOf returns the partitions of hosts (Add, Exclude, Forward), placing those never
// placed (ByAddress; errPlacing if their lookups outlast wait, 0 meaning ctx's end).
func (s *Store) partitionsOf(ctx context.Context, hosts []string, wait time.Duration) (map[string]int, error) {
	if s.place == nil {
		out := make(map[string]int, len(hosts))
		for _, h := range hosts {
			out[h] = PartitionOf(h, s.opts.Partitions)
		}
		return out, nil
	}
	return s.place.place(ctx, hosts, wait)
}

// partitionOf returns the partition of host; ok is false when a ByAddress crawl never placed
// it (it has no URL in the crawl).
func (s *Store) partitionOf(ctx context.Context, host string) (p int, ok bool, err error) {
	if s.place == nil {
		return PartitionOf(host, s.opts.Partitions), true, nil
	}
	return s.place.find(ctx, host)
}

// knownPartition returns host's partition if it is known without asking Redis (for callers
// holding locks).
func (s *Store) knownPartition(host string) (int, bool) {
	if s.place == nil {
		return PartitionOf(host, s.opts.Partitions), true
	}
	return s.place.cached(host)
}

// learn notes that host is in partition p, as p's host set says.
func (s *Store) learn(host string, p int) {
	if s.place != nil {
		s.place.remember(host, p)
	}
}

// placementOf reads a crawl's configuration string's placement.
func placementOf(config string) Placement {
	if strings.HasSuffix(config, ByAddress.configSuffix()) {
		return ByAddress
	}
	return ByName
}
