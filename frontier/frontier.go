package frontier

import (
	"encoding/binary"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/crawl-project/crawl/internal/readyset"
	"github.com/crawl-project/crawl/storage"
	"go.etcd.io/bbolt"
)

// Role is what a URL is fetched for; it is kept with the URL from the moment it is learned.
type Role uint8

// Roles of a URL.
const (
	RolePage      Role = iota // a page: its links are followed
	RoleRequisite             // a page requisite (stylesheet, image, script, font …): fetched for the page that needs it, its links not followed
)

func (r Role) String() string {
	if r == RoleRequisite {
		return "requisite"
	}
	return "page"
}

// Entry is a URL to crawl.
type Entry struct {
	URL    string // normalized URL
	Host   string // urlnorm host key of URL (computed by the caller)
	Depth  int    // link hops from a seed
	Hops   int    // redirect hops that led to this URL (0 unless it is a redirect's target)
	Parent string // URL of the page that linked here (or redirected here), "" for a seed
	Role   Role
}

// Exclusion is a URL recorded as excluded instead of queued. Its Host may be empty (a mailto:
// link has none); such URLs are counted under the host "".
type Exclusion struct {
	Entry
	Reason string // one of the Reason constants
	Detail string // e.g. the robots.txt rule that matched
}

// Exclusion reasons.
const (
	ReasonScope          = "scope"
	ReasonRobots         = "robots"
	ReasonDepth          = "depth"
	ReasonLimit          = "limit"
	ReasonNoFollow       = "nofollow"
	ReasonFilter         = "filter"
	ReasonTooLong        = "too-long"
	ReasonScheme         = "scheme"
	ReasonPrivateAddress = "private-address"
)

// Lease is a queued URL handed out for fetching. It is held in memory only; the URL stays in the
// on-disk queue until Complete (or is leasable again after Release, or after a restart).
type Lease struct {
	Entry
	Attempts int // attempts already made: how many times this URL was completed with Retry
	// Prev is the storage sequence number of the page stored at the URL's last visit, when it
	// is queued again to be revisited (Revise's Revisit); 0 for a URL never fetched.
	Prev uint64
	key  string // queue key
}

// Kind is the outcome of a leased URL.
type Kind int

// Outcomes of a leased URL.
const (
	Fetched  Kind = iota + 1 // a response was stored; the URL is done
	Failed                   // given up; the URL is done
	Excluded                 // not to be fetched after all (robots.txt…); the URL is done
	Retry                    // to be fetched again, not before Result.NotBefore; stays queued
)

func (k Kind) String() string {
	switch k {
	case Fetched:
		return "fetched"
	case Failed:
		return "failed"
	case Excluded:
		return "excluded"
	case Retry:
		return "retry"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Result is what became of a leased URL; Complete records it in one transaction.
type Result struct {
	Kind      Kind
	Page      *storage.Page // Fetched: stored with storage.PutPage in the same transaction (nil: nothing stored)
	Links     []Entry       // Fetched: enqueued if unseen, in the same transaction
	Excluded  []Exclusion   // Fetched: recorded as excluded if unseen, in the same transaction
	Status    int           // Failed: last HTTP status, if any
	Reason    string        // Failed, Excluded: reason (required); Retry: why (optional)
	Detail    string        // Excluded: e.g. the robots rule; Failed: the error text (kept escaped, cut)
	NotBefore time.Time     // Retry: not leased again before this (persisted)
}

// Options configure Open; nil means the defaults.
type Options struct {
	// HostBudget, if positive, caps the URLs of one host that are ever queued: once a host's
	// queued, fetched and failed URLs together number HostBudget, further unseen URLs of that
	// host given to Add or in Result.Links are recorded as excluded with ReasonLimit instead of
	// queued, in the same transaction. It bounds infinite URL spaces (calendars, session ids in
	// links) per host. URLs already queued are not affected. Zero means no cap.
	HostBudget int

	// SeenInMemory bounds how many URLs have their fingerprint in the in-memory seen-set (about
	// 13 bytes each, see docs/frontier.md); 0 means DefaultSeenInMemory. Past the bound, a URL
	// the set does not hold is looked up in the store, and new records are kept by fingerprint
	// rather than appended. A store reopened with a lower bound than it has appended records
	// holds them all.
	SeenInMemory int
}

// DefaultSeenInMemory is Options.SeenInMemory's default: 16M URLs, about 210 MB.
const DefaultSeenInMemory = 1 << 24

// Counts are the frontier's totals. Every URL ever learned is counted in exactly one of
// Queued, Fetched, Failed and Excluded.
type Counts struct {
	Queued     int            // in state queued: waiting, delayed or in flight
	Delayed    int            // of Queued: waiting for a retry time
	InFlight   int            // of Queued: leased now
	Fetched    int            // done with a stored response
	Failed     int            // given up
	Excluded   int            // never to be fetched
	FailedBy   map[string]int // Failed by reason
	ExcludedBy map[string]int // Excluded by reason
	// Dropped counts the URLs over their host's budget that were counted instead of recorded
	// (OverBudgetRecords); they are in none of the states above. Each arrival counts: a URL
	// linked from two pages counts twice.
	Dropped int
}

// HostCount are the counters of one host.
type HostCount struct {
	Host      string
	Queued    int // including Delayed and InFlight
	Delayed   int
	InFlight  int
	Fetched   int
	Failed    int
	Excluded  int
	LastError string // of the last Failed URL of the host
}

// URLState is what the frontier knows about one URL.
type URLState struct {
	State    string // "queued", "fetched", "failed" or "excluded"
	Reason   string // failed/excluded: why; queued: why the last attempt is to be retried
	Detail   string
	Status   int    // last HTTP status, if any
	Attempts int    // attempts made: Retry outcomes, plus one for Fetched or Failed
	Depth    int    // link hops from a seed
	Parent   string // page that linked here
	Host     string
	PageSeq  uint64 // fetched: storage sequence number of the page (0 if none was stored)
	Role     Role
}

// Frontier is the crawl's queue and seen-set. It is safe for concurrent use by multiple
// goroutines. Open one Frontier per store: its in-memory counters and leases are not shared. The
// methods that read or write the store (all but Counts, Hosts, Idle and Release) must not be
// called from inside a transaction or iteration of the same store (storage.DB.Pages callbacks
// included).
type Frontier struct {
	db       *storage.DB
	bolt     *storage.DB // its View, Update and Batch return storage.ErrDamaged for a damaged file
	readOnly bool
	budget   int      // Options.HostBudget
	seen     *seenSet // fingerprints of the seen-set's URLs and where their records are; on a read-only store nil until index
	indexed  sync.Once
	indexErr error
	key      fpKey // of the store's fingerprints (zero on a read-only store without bucketURLs)
	upgraded upgradeStats

	leaseMu   sync.Mutex   // serializes Lease (no two leases pick the same key) against Complete's unlease (no lease picks a key from a snapshot older than its completion); taken before mu
	promoteMu sync.Mutex   // serializes promotions of delayed URLs
	inflight  atomic.Int32 // Complete calls in progress: 1 uses Update, more use Batch

	// mu guards the fields below. It is a leaf lock: never held while calling bbolt or taking
	// another lock.
	mu         sync.Mutex
	hosts      map[string]*hostState
	ready      readyset.Set // ready: hosts with a queued, unleased, undelayed URL
	total      hostCounts   // sum over hosts (LastError unused)
	failedBy   map[string]int
	excludedBy map[string]int
	dropped    int
	leases     int
	earliest   time.Time // lower bound of the first delayed NotBefore, if total.Delayed > 0
	tracking   bool      // a promotion is running; retryMin collects NotBefores added meanwhile
	retryMin   time.Time
}

// hostState mirrors a host's counters on disk, plus its leases.
type hostState struct {
	hostCounts
	leased map[string]struct{} // queue keys
}

func (h *hostState) readyCount() int { return h.Queued - h.Delayed - len(h.leased) }

// unlease drops a lease, and the map with the last one, so that idle hosts cost little.
func (h *hostState) unlease(key string) {
	delete(h.leased, key)
	if len(h.leased) == 0 {
		h.leased = nil
	}
}

// Open opens the frontier kept in db, creating its buckets if db is writable, and loads the
// per-host counters into memory. On a read-only db, only Counts, Hosts, State, NextAt, Idle and
// Check are useful. A writable store in an older format (1 or 2) is upgraded first, in one
// transaction, after a copy of the file is made at db.Path()+BackupSuffix (removed once the
// upgrade has committed); a read-only one is refused with ErrOldFormat.
func Open(db *storage.DB, opts *Options) (*Frontier, error) {
	f := &Frontier{
		db:         db,
		bolt:       db,
		readOnly:   db.ReadOnly(),
		hosts:      make(map[string]*hostState),
		failedBy:   make(map[string]int),
		excludedBy: make(map[string]int),
	}
	if opts != nil && opts.HostBudget > 0 {
		f.budget = opts.HostBudget
	}
	if !f.readOnly {
		if err := f.bolt.Update(func(tx *bbolt.Tx) error {
			for _, name := range allBuckets {
				if _, err := tx.CreateBucketIfNotExists(name); err != nil {
					return err
				}
			}
			if m := tx.Bucket(bucketMeta); m.Get(fpKeyName) == nil {
				_, b := newFPKey()
				return m.Put(fpKeyName, b)
			}
			return nil
		}); err != nil {
			return nil, fmt.Errorf("frontier: open %s: %w", db.Path(), err)
		}
		var err error
		if f.upgraded, err = f.upgradeLegacy(); err != nil {
			return nil, fmt.Errorf("frontier: open %s: %w", db.Path(), err)
		}
	} else if err := f.bolt.View(func(tx *bbolt.Tx) error {
		if legacyIn(tx) == legacyRecords {
			return ErrOldFormat
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("frontier: open %s: %w", db.Path(), err)
	}
	if err := f.bolt.View(f.load); err != nil {
		return nil, fmt.Errorf("frontier: open %s: %w", db.Path(), err)
	}
	if !f.readOnly {
		limit := DefaultSeenInMemory
		if opts != nil && opts.SeenInMemory > 0 {
			limit = opts.SeenInMemory
		}
		var err error
		if f.seen, err = loadSeen(db, limit); err != nil {
			return nil, fmt.Errorf("frontier: open %s: %w", db.Path(), err)
		}
	}
	return f, nil
}

// claims returns an empty set of claims for one write transaction.
func (f *Frontier) claims() *claims { return &claims{set: f.seen} }

// load reads the fingerprint key and the counters from disk into memory.
func (f *Frontier) load(tx *bbolt.Tx) error {
	if m := tx.Bucket(bucketMeta); m != nil {
		k, err := parseFPKey(m.Get(fpKeyName))
		if err != nil {
			return fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
		f.key = k
	} else if tx.Bucket(bucketURLs) != nil {
		return fmt.Errorf("%w: fingerprinted URLs without a fingerprint key", ErrCorrupt)
	}
	if b := tx.Bucket(bucketHosts); b != nil {
		if err := b.ForEach(func(k, v []byte) error {
			c, err := decodeHostCounts(v)
			if err != nil {
				return fmt.Errorf("%w: host %q: %v", ErrCorrupt, k, err)
			}
			host := hostFromBucketKey(k)
			f.hosts[host] = &hostState{hostCounts: c}
			f.touch(host)
			return nil
		}); err != nil {
			return err
		}
	}
	if b := tx.Bucket(bucketCounts); b != nil {
		if err := b.ForEach(func(k, v []byte) error {
			n, err := counterValue(v)
			if err != nil {
				return fmt.Errorf("%w: counter %q: %v", ErrCorrupt, k, err)
			}
			switch name := string(k); {
			case name == countQueued:
				f.total.Queued = n
			case name == countDelayed:
				f.total.Delayed = n
			case name == countFetched:
				f.total.Fetched = n
			case name == countFailed:
				f.total.Failed = n
			case name == countExcluded:
				f.total.Excluded = n
			case name == countDropped:
				f.dropped = n
			case strings.HasPrefix(name, prefixFailed):
				f.failedBy[name[len(prefixFailed):]] = n
			case strings.HasPrefix(name, prefixExclude):
				f.excludedBy[name[len(prefixExclude):]] = n
			}
			return nil
		}); err != nil {
			return err
		}
	}
	if b := tx.Bucket(bucketDelayed); b != nil {
		if k, _ := b.Cursor().First(); k != nil {
			if len(k) != 16 {
				return fmt.Errorf("%w: delayed key %x", ErrCorrupt, k)
			}
			f.earliest = keyTime(binary.BigEndian.Uint64(k))
		}
	}
	return nil
}

// touch updates the ready set for host; f.mu must be held (or f not yet shared).
func (f *Frontier) touch(host string) {
	if h := f.hosts[host]; h != nil && h.readyCount() > 0 {
		f.ready.Ready(host)
	} else {
		f.ready.Forget(host)
	}
}

func (f *Frontier) host(name string) *hostState {
	h := f.hosts[name]
	if h == nil {
		h = &hostState{}
		f.hosts[name] = h
	}
	return h
}

// apply adds a committed transaction's deltas to the in-memory counters; f.mu must be held.
func (f *Frontier) apply(d *delta) {
	for name, hd := range d.hosts {
		h := f.host(name)
		h.add(hd)
		f.total.add(&hostCounts{Queued: hd.Queued, Delayed: hd.Delayed, Fetched: hd.Fetched,
			Failed: hd.Failed, Excluded: hd.Excluded})
		f.touch(name)
	}
	for r, n := range d.failedBy {
		f.failedBy[r] += n
	}
	for r, n := range d.excludedBy {
		f.excludedBy[r] += n
	}
	f.dropped += d.dropped
}

// ReadyHosts returns, sorted, the hosts that have at least one unleased URL ready to be leased
// at now, after moving the delayed URLs due at now back into their queues. (If that move fails,
// the error is returned by the next Lease.) It scans every ready host; TakeReady does not. A
// TakeReady after it returns only the hosts that become ready later.
func (f *Frontier) ReadyHosts(now time.Time) []string {
	_ = f.promote(now)
	f.mu.Lock()
	hosts := f.ready.TakeAll()
	f.mu.Unlock()
	sort.Strings(hosts)
	return hosts
}

// TakeReady returns the hosts that became ready (gained an unleased URL ready to be leased)
// since the previous TakeReady, in the order they did, after moving the delayed URLs due at
// now back into their queues; the first call returns every ready host. A host comes back once
// each time it becomes ready: a caller that takes hosts this way keeps its own list of the
// ones that stay ready (Ready tells), and so never scans every ready host.
func (f *Frontier) TakeReady(now time.Time) []string {
	_ = f.promote(now)
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ready.Take(now)
}

// Ready reports whether host has an unleased URL ready to be leased.
func (f *Frontier) Ready(host string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ready.IsReady(host)
}

// NextAt moves the delayed URLs due at now back into their queues and returns the earliest
// NotBefore among the URLs still delayed: when ReadyHosts may next grow without a Complete. It
// returns the zero time if nothing is delayed. The time may be early, never late.
func (f *Frontier) NextAt(now time.Time) time.Time {
	_ = f.promote(now)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.total.Delayed == 0 {
		return time.Time{}
	}
	return f.earliest
}

// Counts returns the totals.
func (f *Frontier) Counts() Counts {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := Counts{
		Queued: f.total.Queued, Delayed: f.total.Delayed, InFlight: f.leases,
		Fetched: f.total.Fetched, Failed: f.total.Failed, Excluded: f.total.Excluded,
		FailedBy: make(map[string]int), ExcludedBy: make(map[string]int), Dropped: f.dropped,
	}
	for r, n := range f.failedBy {
		if n != 0 {
			c.FailedBy[r] = n
		}
	}
	for r, n := range f.excludedBy {
		if n != 0 {
			c.ExcludedBy[r] = n
		}
	}
	return c
}

// Hosts returns the counters of every host, in no particular order (a broad crawl has 100,000
// hosts and its status is taken every second: callers sort what they show).
func (f *Frontier) Hosts() []HostCount {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]HostCount, 0, len(f.hosts))
	for name, h := range f.hosts {
		out = append(out, HostCount{Host: name, Queued: h.Queued, Delayed: h.Delayed, InFlight: len(h.leased),
			Fetched: h.Fetched, Failed: h.Failed, Excluded: h.Excluded, LastError: h.LastError})
	}
	return out
}

// Idle reports whether nothing is queued, delayed or leased: the crawl is over unless something
// is added.
func (f *Frontier) Idle() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.total.Queued == 0 && f.leases == 0
}

// index makes f.seen on a read-only store, once: where the records of bucketRecords are. A
// writable store has it from Open.
func (f *Frontier) index() error {
	if f.readOnly {
		f.indexed.Do(func() { f.seen, f.indexErr = loadSeen(f.db, 0) })
	}
	return f.indexErr
}

// State returns what is recorded about url, and whether it was ever seen.
func (f *Frontier) State(url string) (URLState, bool, error) {
	var s URLState
	var ok bool
	err := f.index()
	if err == nil {
		err = f.bolt.View(func(tx *bbolt.Tx) error {
			_, r, found, err := f.reader(tx).find(url)
			if err != nil || !found {
				return err
			}
			ok = true
			s = r.public()
			return nil
		})
	}
	if err != nil {
		return URLState{}, false, fmt.Errorf("frontier: state of %s: %w", url, err)
	}
	return s, ok, nil
}
