package fleet

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/crawl-project/crawl/frontier"
	"github.com/redis/go-redis/v9"
)

// usedMemory reads used_memory from INFO memory: all the server holds.
func usedMemory(t testing.TB, rdb redis.UniversalClient) int64 {
	t.Helper()
	return memoryField(t, rdb, "used_memory")
}

// datasetMemory reads used_memory_dataset from INFO memory: what the keys' values hold,
// without the buffers of clients and of the append-only file, whose size follows the calls
// in flight and the server's timing rather than what is stored.
func datasetMemory(t testing.TB, rdb redis.UniversalClient) int64 {
	t.Helper()
	return memoryField(t, rdb, "used_memory_dataset")
}

func memoryField(t testing.TB, rdb redis.UniversalClient, field string) int64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no %s in INFO memory:\n%s", field, info)
	return 0
}

// The seen-set costs about as much as its fingerprints, at any size: measured with INFO memory
// (datasetMemory) on a real server, 60,000 URLs in one partition.
func TestSeenSetMemoryPerURL(t *testing.T) {
	parallel(t)
	const n = 60_000
	rdb := newRedis(t)
	ctx := context.Background()
	s := newStore(t, rdb, "w", &Options{Partitions: 1})
	mustAcquire(t, s, 0)
	urls := make([]string, n)
	for i := range urls {
		urls[i] = fmt.Sprintf("http://host%d.example/section/%d/page-%d.html", i%97, i/97, i)
	}
	var before int64
	for start := 0; start < n; start += 1000 {
		if start == 1000 { // after the first batch: scripts loaded, buffers grown
			before = datasetMemory(t, rdb)
		}
		var ex []frontier.Exclusion
		for _, u := range urls[start : start+1000] {
			ex = append(ex, frontier.Exclusion{Entry: frontier.Entry{URL: u, Host: "one.example"}, Reason: frontier.ReasonScope})
		}
		if err := s.Exclude(ctx, ex); err != nil {
			t.Fatal(err)
		}
	}
	seen := float64(datasetMemory(t, rdb)-before) / (n - 1000)

	before = datasetMemory(t, rdb)
	pipe := rdb.Pipeline()
	for _, u := range urls {
		pipe.SAdd(ctx, "plain-set", u)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	plain := float64(datasetMemory(t, rdb)-before) / n
	rdb.Del(ctx, "plain-set")

	t.Logf("seen-set: %.1f bytes per URL; a plain SET of the URLs: %.1f", seen, plain)
	if seen > 10 || seen*5 > plain {
		t.Fatalf("seen-set %.1f bytes per URL: want at most 10 and a fifth of a plain SET (%.1f)", seen, plain)
	}
	// Every URL is found again: adding them all once more adds none.
	for start := 0; start < n; start += 5000 {
		var es []frontier.Entry
		for _, u := range urls[start : start+5000] {
			es = append(es, frontier.Entry{URL: u, Host: "one.example"})
		}
		if added, err := s.Add(ctx, es); err != nil || added != 0 {
			t.Fatalf("adding seen URLs again: %d added, %v", added, err)
		}
	}
}

// A queued URL costs its seen-set entry, its item in its host's queue and its share of the
// host's keys. Measured as BenchmarkRedisMemory does, at a tenth of its size (100,000 URLs of
// about 60 bytes over 1,000 hosts in 128 partitions: as many URLs per host and per partition).
func TestQueuedMemoryPerURL(t *testing.T) {
	parallel(t)
	const n, hosts = 100_000, 1000
	rdb := newRedis(t)
	ctx := context.Background()
	s := newStore(t, rdb, "w", &Options{Partitions: 128})
	for p := range 128 {
		mustAcquire(t, s, p)
	}
	var before int64
	for start := 0; start < n; start += 10_000 {
		if start == 10_000 { // after the first batch: scripts loaded, buffers grown
			before = datasetMemory(t, rdb)
		}
		es := make([]frontier.Entry, 0, 10_000)
		for i := start; i < start+10_000; i++ {
			es = append(es, sizingURL(i, hosts))
		}
		if added, err := s.Add(ctx, es); err != nil || added != len(es) {
			t.Fatalf("add: %d of %d, %v", added, len(es), err)
		}
	}
	queued := float64(datasetMemory(t, rdb)-before) / (n - 10_000)
	t.Logf("%.1f bytes per queued URL", queued)
	if queued > 60 {
		t.Fatalf("%.1f bytes per queued URL, want at most 60", queued)
	}
}
