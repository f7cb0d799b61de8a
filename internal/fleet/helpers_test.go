package fleet

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crawl-project/crawl/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// TestMain runs up to testParallel tests at once unless -parallel says otherwise.
func TestMain(m *testing.M) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		flag.Set("test.parallel", strconv.Itoa(testParallel))
	}
	os.Exit(m.Run())
}

// testParallel is how many of this package's parallel tests run at once by default: they
// mostly wait on the redis-servers they start (about 22 s of CPU in a 110 s run on one
// thread), so the default (GOMAXPROCS, 2 on a 2-core machine) leaves the cores idle.
const testParallel = 8

// parallel runs t in parallel with the package's other parallel tests, unless t runs on
// servers shared with the tests before and after it (onCluster, onTarget), which run in turn.
// A test whose partition lease is shorter than 2 s stays sequential: starved past its lease,
// a worker loses its partitions, which such a test counts as a failure.
func parallel(t *testing.T) {
	if targetOf(t) == nil {
		t.Parallel()
	}
}

// targets maps a test's name to what newRedis returns in its subtests (onCluster, onTarget).
var targets sync.Map // string -> func(*testing.T) redis.UniversalClient

// target makes newRedis return newClient(t) in the subtests of t until t ends.
func target(t *testing.T, newClient func(t *testing.T) redis.UniversalClient) {
	if _, dup := targets.LoadOrStore(t.Name(), newClient); dup {
		t.Fatalf("%s already runs on shared servers", t.Name())
	}
	t.Cleanup(func() { targets.Delete(t.Name()) })
}

// targetOf is what newRedis returns in t: the target of t or of its nearest parent that has
// one, or nil (a redis-server of t's own).
func targetOf(t *testing.T) func(t *testing.T) redis.UniversalClient {
	for name := t.Name(); ; {
		if f, ok := targets.Load(name); ok {
			return f.(func(t *testing.T) redis.UniversalClient)
		}
		i := strings.LastIndexByte(name, '/')
		if i < 0 {
			return nil
		}
		name = name[:i]
	}
}

// newRedis starts a real redis-server for t and returns a client for it, closed at cleanup;
// under onCluster or onTarget, it returns a client for their emptied servers instead.
func newRedis(t *testing.T) redis.UniversalClient {
	t.Helper()
	if newClient := targetOf(t); newClient != nil {
		return newClient(t)
	}
	rdb, _ := newRedisServer(t)
	return rdb
}

// onCluster runs each test of tests on one real 3-master Redis Cluster, in turn, each through
// a cluster client after the cluster is emptied.
func onCluster(t *testing.T, tests ...func(*testing.T)) {
	c := redistest.StartCluster(t, 3, 0)
	target(t, func(t *testing.T) redis.UniversalClient {
		rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), ClusterStateReloadInterval: time.Second})
		t.Cleanup(func() { rdb.Close() })
		err := rdb.ForEachMaster(context.Background(), func(ctx context.Context, c *redis.Client) error {
			return c.FlushAll(ctx).Err()
		})
		if err != nil {
			t.Fatal(err)
		}
		return rdb
	})
	for _, test := range tests {
		name := runtime.FuncForPC(reflect.ValueOf(test).Pointer()).Name()
		t.Run(name[strings.LastIndexByte(name, '.')+1:], test)
	}
}

// keysOf lists the keys matching pattern on every node (every master of a cluster).
func keysOf(t *testing.T, rdb redis.UniversalClient, pattern string) []string {
	t.Helper()
	ctx := context.Background()
	var mu sync.Mutex
	var out []string
	scan := func(ctx context.Context, c *redis.Client) error {
		iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
		for iter.Next(ctx) {
			mu.Lock()
			out = append(out, iter.Val())
			mu.Unlock()
		}
		return iter.Err()
	}
	var err error
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, scan)
	case *redis.Client:
		err = scan(ctx, c)
	}
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// newRedisServer is newRedis that also returns the server, to kill and restart it.
func newRedisServer(t *testing.T) (*redis.Client, *redistest.Server) {
	t.Helper()
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { rdb.Close() })
	return rdb, srv
}

// newStore opens crawl as worker on rdb and checks the crawl's invariants when t ends.
func newStore(t *testing.T, rdb redis.UniversalClient, worker string, opts *Options) *Store {
	t.Helper()
	s, err := Open(context.Background(), rdb, "t", worker, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			checkInvariants(t, s)
		}
	})
	return s
}

// twoWorkers opens the crawl as workers "a" and "b" on one new redis-server.
func twoWorkers(t *testing.T, opts *Options) (a, b *Store) {
	t.Helper()
	rdb := newRedis(t)
	return newStore(t, rdb, "a", opts), newStore(t, rdb, "b", opts)
}

// mustAcquire sends s's heartbeat (its worker's lease) and takes partition p for s, or fails t.
func mustAcquire(t *testing.T, s *Store, p int) Ownership {
	t.Helper()
	sent := time.Now()
	if _, err := s.heartbeat(context.Background()); err != nil {
		t.Fatal(err)
	}
	o, ok, err := s.Acquire(context.Background(), sent, p)
	if err != nil || !ok {
		t.Fatalf("%s: acquire %d: ok=%v err=%v", s.worker, p, ok, err)
	}
	drainAll(t, s, o)
	return o
}

// ownRest acquires for s every partition but those of held (drainAll: what waits in their
// inboxes is recorded).
func ownRest(t *testing.T, s *Store, held ...Ownership) {
	t.Helper()
	for p := range s.Partitions() {
		if !slices.ContainsFunc(held, func(o Ownership) bool { return o.Partition == p }) {
			mustAcquire(t, s, p)
		}
	}
}

// drainAll records everything waiting in o's partition's inbox (Store.Drain), as the owner's
// Frontier.Run does round after round; it reports how many URLs were queued.
func drainAll(t *testing.T, s *Store, o Ownership) int {
	t.Helper()
	ctx := context.Background()
	n := 0
	for {
		left, err := s.rdb.LLen(ctx, s.k.inbox(o.Partition)).Result()
		if err != nil {
			t.Fatal(err)
		}
		if left == 0 {
			return n
		}
		got, err := s.Drain(ctx, o)
		if err != nil {
			t.Fatalf("%s: drain partition %d: %v", s.worker, o.Partition, err)
		}
		n += got
	}
}

// queueAndOwn adds n URLs of host and acquires the host's partition for s.
func queueAndOwn(t *testing.T, s *Store, host string, n int) Ownership {
	t.Helper()
	if _, err := s.Add(context.Background(), entries(host, n)); err != nil {
		t.Fatal(err)
	}
	return mustAcquire(t, s, PartitionOf(host, s.Partitions()))
}

// waitLeaseEnded waits until s's worker's lease has ended in Redis (its TTL ran out with no
// heartbeat).
func waitLeaseEnded(t *testing.T, s *Store) {
	t.Helper()
	ctx := context.Background()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		alive, err := s.alive(ctx, []string{s.worker})
		if err != nil {
			t.Fatal(err)
		}
		if !alive[s.worker] {
			return
		}
	}
	t.Fatalf("the lease of %s never ended", s.worker)
}

var tagRe = regexp.MustCompile(`^crawl:t:\{(\d+)\}:(\w+)(?::(.*))?$`)

// checkInvariants scans every key of the crawl and checks that each partition key carries its
// partition's tag, that per-host keys are in their host's partition, and that each
// partition's counters agree with what its queues, delayed and in-flight sets and seen-set hold.
func checkInvariants(t *testing.T, s *Store) {
	t.Helper()
	ctx := context.Background()
	type tally struct {
		queued, delayed, inflight, outbox, inbox, seen int
	}
	parts := map[int]*tally{}
	part := func(p int) *tally {
		if parts[p] == nil {
			parts[p] = &tally{}
		}
		return parts[p]
	}
	for _, key := range keysOf(t, s.rdb, "crawl:t:*") {
		if key == s.k.config() || key == s.k.workers() || key == s.k.released() || key == s.k.active() || strings.HasPrefix(key, "crawl:t:shared:") || strings.HasPrefix(key, "crawl:t:{workers}:") {
			continue
		}
		m := tagRe.FindStringSubmatch(key)
		if m == nil {
			t.Errorf("key %q has no partition tag", key)
			continue
		}
		p, _ := strconv.Atoi(m[1])
		kind, rest := m[2], m[3]
		if kind == "q" || kind == "d" || kind == "h" {
			got := PartitionOf(rest, s.opts.Partitions) // "h": a gate key (an address key ByAddress)
			if kind != "h" {
				got, _, _ = s.partitionOf(ctx, rest)
			}
			if got != p {
				t.Errorf("key %q: host %q belongs to partition %d", key, rest, got)
			}
		}
		c := part(p)
		switch kind {
		case "q":
			n, _ := s.rdb.LLen(ctx, key).Result()
			c.queued += int(n)
			if in, _ := s.rdb.SIsMember(ctx, s.k.hosts(p), rest).Result(); n > 0 && !in {
				t.Errorf("host %q has %d URLs queued and is not in its partition's hosts set", rest, n)
			}
		case "d":
			n, _ := s.rdb.ZCard(ctx, key).Result()
			c.delayed += int(n)
		case "outbox":
			n, _ := s.rdb.LLen(ctx, key).Result()
			c.outbox += int(n)
		case "inflight":
			n, _ := s.rdb.ZCard(ctx, key).Result()
			c.inflight += int(n)
		case "in":
			n, _ := s.rdb.LLen(ctx, key).Result()
			c.inbox += int(n)
		case "sl":
			els, err := s.rdb.LRange(ctx, key, 0, -1).Result()
			if err != nil {
				t.Errorf("partition %d: seen log: %v", p, err)
			}
			fps := map[uint64]bool{}
			for _, e := range els {
				if len(e)%8 != 0 {
					t.Errorf("partition %d: seen log element of %d bytes, not whole 8-byte records", p, len(e))
				}
				for i := 0; i+8 <= len(e); i += 8 {
					fp := binary.LittleEndian.Uint64([]byte(e[i : i+8]))
					if fps[fp] {
						t.Errorf("partition %d: fingerprint %#x recorded twice in the seen log", p, fp)
					}
					fps[fp] = true
				}
			}
			c.seen = len(fps)
		}
	}
	for p, c := range parts {
		h, _ := s.rdb.HGetAll(ctx, s.k.counts(p)).Result()
		n := func(name string) int { v, _ := strconv.Atoi(h[name]); return v }
		got := fmt.Sprintf("queued=%d delayed=%d inflight=%d outbox=%d inbox=%d", n("queued"), n("delayed"), n("inflight"), n("outbox"), n("inbox"))
		want := fmt.Sprintf("queued=%d delayed=%d inflight=%d outbox=%d inbox=%d", c.queued+c.delayed+c.inflight, c.delayed, c.inflight, c.outbox, c.inbox)
		if got != want {
			t.Errorf("partition %d: counters %s, keys hold %s", p, got, want)
		}
		if done := n("queued") + n("fetched") + n("failed") + n("excluded"); c.seen != done {
			t.Errorf("partition %d: seen-set holds %d URLs, counters %d", p, c.seen, done)
		}
	}
}
