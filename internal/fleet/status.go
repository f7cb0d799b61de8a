package fleet

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/crawl-project/crawl/frontier"
	"github.com/redis/go-redis/v9"
)

// View is a crawl's state across its fleet: the partitions' summed counters and one line per
// worker. Its parts are read one after another, not in one transaction, so while workers run
// it is a near snapshot (counters taken within milliseconds of each other).
type View struct {
	Crawl          string
	Now            time.Time // Redis' clock when the view was read
	Partitions     int       // the crawl's partitions
	PartitionsFree int       // partitions with no owner
	Counts         frontier.Counts
	Outbox         int // links of completed pages not yet forwarded to their partitions
	Inbox          int // payloads of URLs sent to partitions, not yet recorded by their owners
	HostsQueued    int // hosts with URLs queued or delayed
	Workers        []WorkerView
	// SetAside counts the unreadable values workers moved to their partitions' bad lists,
	// Repaired the damaged values the scripts or the partitions' owners repaired.
	SetAside, Repaired int
	// Damaged names the counters read as 0 because they are not counts (the first
	// maxDamagedShown; DamagedCount says how many), until their partitions' owners recount them.
	Damaged      []string
	DamagedCount int
}

// maxWorkersShown bounds the workers a View reads from the heartbeats and from the reports
// (the latest of each), so that a hostile workers set costs a bounded read.
const maxWorkersShown = 1000

// maxDamagedShown bounds the damaged counters a View names.
const maxDamagedShown = 10

// WorkerState says whether a worker in the view is crawling.
type WorkerState int

const (
	// WorkerAlive: its lease (its Keeper's last heartbeat plus its lease TTL) has not ended.
	WorkerAlive WorkerState = iota + 1
	// WorkerGone: no recent heartbeat (it stopped, died or lost Redis); its last report is
	// shown until it expires (ReportTTL).
	WorkerGone
)

func (s WorkerState) String() string {
	switch s {
	case WorkerAlive:
		return "alive"
	case WorkerGone:
		return "gone"
	}
	return "WorkerState(" + strconv.Itoa(int(s)) + ")"
}

// MarshalText writes the state's name.
func (s WorkerState) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads a state's name.
func (s *WorkerState) UnmarshalText(b []byte) error {
	for _, c := range []WorkerState{WorkerAlive, WorkerGone} {
		if string(b) == c.String() {
			*s = c
			return nil
		}
	}
	return fmt.Errorf("fleet: unknown worker state %q", b)
}

// WorkerView is one worker in the View: every worker that holds a partition, sent a heartbeat
// that is not yet forgotten, or reported within ReportTTL.
type WorkerView struct {
	ID         string      `json:"id"`
	State      WorkerState `json:"state"`
	Partitions []int       `json:"partitions"` // partitions whose owner key names it now, in order
	Pages      int64       `json:"pages"`      // as last reported (0 if it never reported)
	// Heartbeat is its Keeper's last heartbeat, on Redis' clock (nil if none is kept).
	Heartbeat *time.Time `json:"last_heartbeat,omitempty"`
	// ReportedAt is when its last report arrived, on Redis' clock (nil if none is kept).
	ReportedAt *time.Time `json:"reported_at,omitempty"`
	Host       string     `json:"host,omitempty"`
	Data       string     `json:"data,omitempty"`

	ttl time.Duration // its lease TTL, as reported (0: not reported)
}

// ReadView reads the fleet view of crawl. It fails with ErrNoCrawl when Redis holds no crawl
// of that name, and with the client's error (which names the address) when Redis cannot be
// reached. It writes nothing.
func ReadView(ctx context.Context, rdb redis.UniversalClient, crawl string) (View, error) {
	v := View{Crawl: crawl}
	if err := validName(crawl); err != nil {
		return v, err
	}
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		return v, fmt.Errorf("fleet: read clock: %w", err)
	}
	v.Now = now
	k := keys{crawl: crawl}
	cfg, err := rdb.Get(ctx, k.config()).Result()
	if errors.Is(err, redis.Nil) {
		return v, fmt.Errorf("%w: %q", ErrNoCrawl, crawl)
	}
	if err != nil {
		return v, fmt.Errorf("fleet: read crawl %q: %w", crawl, err)
	}
	partitions, err := parseConfig(crawl, cfg)
	if err != nil {
		return v, err
	}
	o := Options{Partitions: partitions}
	s := &Store{rdb: rdb, k: keys{crawl: crawl}, opts: o.withDefaults()}
	v.Partitions = o.Partitions
	ps, err := s.PartitionCounts(ctx)
	if err != nil {
		return v, err
	}
	v.Counts = ps.Sum()
	for _, p := range ps {
		v.Outbox += p.Outbox
		v.Inbox += p.Inbox
		v.SetAside += p.Bad
		v.Repaired += p.Repaired
		v.DamagedCount += len(p.Damaged)
		if room := maxDamagedShown - len(v.Damaged); room > 0 {
			v.Damaged = append(v.Damaged, p.Damaged[:min(room, len(p.Damaged))]...)
		}
	}

	pipe := rdb.Pipeline()
	owners := make([]*redis.StringCmd, o.Partitions)
	hosts := make([]*redis.IntCmd, o.Partitions)
	for p := range owners {
		owners[p] = pipe.Get(ctx, s.k.owner(p))
		hosts[p] = pipe.SCard(ctx, s.k.hosts(p))
	}
	beats := pipe.ZRangeWithScores(ctx, s.k.workers(), -maxWorkersShown, -1)
	reported := pipe.ZRange(ctx, s.k.reports(), -maxWorkersShown, -1)
	pipe.Exec(ctx) // errors are checked per command: a missing owner key (redis.Nil) is no error
	for p := range owners {
		if err := owners[p].Err(); err != nil && !errors.Is(err, redis.Nil) {
			return v, fmt.Errorf("fleet: read owner of partition %d: %w", p, err)
		}
		if err := hosts[p].Err(); err != nil {
			return v, fmt.Errorf("fleet: read hosts of partition %d: %w", p, err)
		}
	}
	if err := cmp.Or(beats.Err(), reported.Err()); err != nil {
		return v, fmt.Errorf("fleet: read workers: %w", err)
	}
	byID := map[string]*WorkerView{}
	worker := func(id string) *WorkerView {
		if byID[id] == nil {
			byID[id] = &WorkerView{ID: id, State: WorkerGone, Partitions: []int{}}
		}
		return byID[id]
	}
	for p := range owners {
		v.HostsQueued += int(hosts[p].Val())
		tok, err := owners[p].Result()
		if err != nil { // redis.Nil: no owner
			v.PartitionsFree++
			continue
		}
		_, id, _ := strings.Cut(tok, ":")
		w := worker(id)
		w.Partitions = append(w.Partitions, p)
	}
	leaseEnds := map[string]time.Time{} // the workers set scores each by the end of its lease
	for _, z := range beats.Val() {
		id, _ := z.Member.(string)
		if z.Score <= float64(now.Add(MaxLeaseTTL).UnixMilli()) { // else damage: no lease
			leaseEnds[id] = time.UnixMilli(int64(z.Score))
		}
		worker(id)
	}
	if err := readReports(ctx, s, reported.Val(), worker); err != nil {
		return v, err
	}

	for id, w := range byID {
		if end, ok := leaseEnds[id]; ok {
			hb := end.Add(-w.leaseTTL(s.opts.LeaseTTL))
			w.Heartbeat = &hb
			if now.Before(end) {
				w.State = WorkerAlive
			}
		}
		v.Workers = append(v.Workers, *w)
	}
	slices.SortFunc(v.Workers, func(a, b WorkerView) int { return strings.Compare(a.ID, b.ID) })
	return v, nil
}

// leaseTTL is the lease TTL w reported (its liveness horizon), or def.
func (w *WorkerView) leaseTTL(def time.Duration) time.Duration {
	if w.ttl > 0 {
		return w.ttl
	}
	return def
}

// readReports reads the report hashes of ids into their WorkerViews (one pipelined read); a
// report that expired meanwhile is left out.
func readReports(ctx context.Context, s *Store, ids []string, worker func(string) *WorkerView) error {
	if len(ids) == 0 {
		return nil
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	for i, id := range ids {
		cmds[i] = pipe.HGetAll(ctx, s.k.report(id))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("fleet: read worker reports: %w", err)
	}
	for i, cmd := range cmds {
		h := cmd.Val()
		if len(h) == 0 {
			continue
		}
		w := worker(ids[i])
		w.Pages, _ = strconv.ParseInt(h["pages"], 10, 64)
		w.Host, w.Data = h["host"], h["data"]
		if ms, err := strconv.ParseInt(h["ttl"], 10, 64); err == nil && ms > 0 && ms <= MaxLeaseTTL.Milliseconds() {
			w.ttl = time.Duration(ms) * time.Millisecond
		}
		if ms, err := strconv.ParseInt(h["at"], 10, 64); err == nil {
			at := time.UnixMilli(ms)
			w.ReportedAt = &at
		}
	}
	return nil
}
