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

// usedMemory reads used_memory from INFO memory.
func usedMemory(t testing.TB, rdb redis.UniversalClient) int64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no used_memory in INFO memory:\n%s", info)
	return 0
}

// The seen-set costs about as much as its fingerprints: measured with INFO memory on a real
// server against a plain SET of the same URLs. Buckets are sized to stay in Redis' compact
// listpack encoding (at most 128 fields by default): 50,000 URLs in 512 buckets.
func TestSeenSetMemoryPerURL(t *testing.T) {
	const n = 50_000
	rdb := newRedis(t)
	ctx := context.Background()
	s := newStore(t, rdb, "w", &Options{Partitions: 1})
	urls := make([]string, n)
	for i := range urls {
		urls[i] = fmt.Sprintf("http://host%d.example/section/%d/page-%d.html", i%97, i/97, i)
	}
	before := usedMemory(t, rdb)
	for start := 0; start < n; start += 1000 {
		var ex []frontier.Exclusion
		for _, u := range urls[start : start+1000] {
			ex = append(ex, frontier.Exclusion{Entry: frontier.Entry{URL: u, Host: "one.example"}, Reason: frontier.ReasonScope})
		}
		if err := s.Exclude(ctx, ex); err != nil {
			t.Fatal(err)
		}
	}
	seen := float64(usedMemory(t, rdb)-before) / n

	before = usedMemory(t, rdb)
	pipe := rdb.Pipeline()
	for _, u := range urls {
		pipe.SAdd(ctx, "plain-set", u)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	plain := float64(usedMemory(t, rdb)-before) / n
	rdb.Del(ctx, "plain-set")

	t.Logf("seen-set: %.1f bytes per URL; a plain SET of the URLs: %.1f", seen, plain)
	if seen > 24 || seen*3 > plain {
		t.Fatalf("seen-set %.1f bytes per URL: want at most 24 and a third of a plain SET (%.1f)", seen, plain)
	}
}
