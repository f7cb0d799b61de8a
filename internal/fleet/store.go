package fleet

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

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
	owned    map[int]*seenSet        // seen-sets of the partitions this Store owns, by partition (guarded by mu)

	asideFn atomic.Pointer[func(asideNote)] // told of each value set aside (watchSetAside)
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

// configLayout names how this version stores a crawl: the seen-set as bucket sets of integers,
// queue items in the binary item encoding. A crawl stored otherwise (among them "seen=hash",
// one hash of byte-string buckets) is refused (parseConfig).
const configLayout = "seen=log items=bin1 active-set"

// configOf is the configuration a crawl of partitions partitions records at its creation.
func configOf(partitions int) string {
	return fmt.Sprintf("partitions=%d %s", partitions, configLayout)
}

// parseConfig returns the partitions of crawl's recorded configuration cfg (configOf, then its
// placement's suffix, read by placementOf). A crawl made by an earlier version (its seen-set
// in one hash, JSON queue items) is refused with ErrConfigMismatch, saying so.
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
			"a seen-set its owners keep, logged as 8-byte fingerprints, and binary queue items): finish it with the version that started it, or start a new crawl (--crawl NAME)",
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
