package main

import (
	"bytes"
	"compress/flate"
	"context"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/crawl-project/crawl/internal/fleet"
	"github.com/crawl-project/crawl/internal/redistest"
	"github.com/crawl-project/crawl/internal/simweb"
	"github.com/redis/go-redis/v9"
)

// Hostile contents written straight into a shared crawl's Redis, as any machine of the fleet
// could (docs/guarantees.md "Hostile contents in Redis").

// crawlCmdWithin is crawlCmd that also fails t when the command takes longer than d.
func crawlCmdWithin(t *testing.T, d time.Duration, args ...string) (int, string, string) {
	t.Helper()
	start := time.Now()
	code, out, errOut := crawlCmd(t, "", args...)
	if took := time.Since(start); took > d {
		t.Errorf("crawl %s took %v; want at most %v", strings.Join(args, " "), took, d)
	}
	return code, out, errOut
}

// crawl status --redis and crawl urls --redis end at once with an error naming the key on a
// configuration of a billion partitions (status ran out of memory, urls looped over every
// partition); crawl urls skips and counts queue items it cannot read; crawl add of a new URL
// says it was added although the seen-set's counts are damaged (they kept Redis busy in a
// script for good: every command then answered BUSY).
func TestFleetHostileRedisOperators(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	const layout = " seen=log items=bin1 active-set"
	redisURL := srv.URL()

	rdb.Set(ctx, "crawl:t:config", "partitions=1000000000"+layout, 0)
	for _, cmd := range []string{"status", "urls"} {
		code, _, errOut := crawlCmdWithin(t, 20*time.Second, cmd, "--redis", redisURL, "--crawl", "t")
		if code != exitRuntime || !strings.Contains(errOut, "crawl:t:config") || !strings.Contains(errOut, "1000000000") {
			t.Errorf("crawl %s --redis on partitions=1000000000: exit %d, %q; want %d naming the key and its value", cmd, code, errOut, exitRuntime)
		}
	}

	rdb.Set(ctx, "crawl:t:config", "partitions=4"+layout, 0)
	rdb.Set(ctx, "crawl:t:shared:scope-mode", "host", 0)
	host := "a.example"
	p := fleet.PartitionOf(host, 4)
	counts := "crawl:t:{" + strconv.Itoa(p) + "}:counts"
	queue := "crawl:t:{" + strconv.Itoa(p) + "}:q:" + host
	hostsKey := "crawl:t:{" + strconv.Itoa(p) + "}:hosts"
	// a seen log that is not a list: an operator's add does not read it (the owner does)
	rdb.Set(ctx, "crawl:t:{"+strconv.Itoa(p)+"}:sl", "\x1b[2J", 0)
	rdb.HSet(ctx, counts, "queued", "-3")
	code, out, errOut := crawlCmdWithin(t, 20*time.Second, "add", "--redis", redisURL, "--crawl", "t", "http://a.example/one", "http://a.example/two")
	if code != exitOK || !strings.Contains(out, "2 seeds sent") {
		t.Errorf("crawl add with a damaged seen log: exit %d, %q %q; want the seeds sent", code, out, errOut)
	}

	rdb.LPush(ctx, queue, "\xff\x1b[2J", "")
	rdb.SAdd(ctx, hostsKey, host)
	code, out, errOut = crawlCmdWithin(t, 20*time.Second, "urls", "--redis", redisURL, "--crawl", "t")
	if code != exitRuntime || !strings.Contains(errOut, "2 unreadable items") || !strings.Contains(errOut, queue) ||
		strings.Contains(errOut, "\x1b") || strings.Count(out, "http://a.example/") != 0 {
		t.Errorf("crawl urls --redis with 2 unreadable items: exit %d,\n%s\n%q; want the 2 named, escaped, and counted (the seeds wait in the inbox: no URL queued)", code, out, errOut)
	}
	code, out, errOut = crawlCmdWithin(t, 20*time.Second, "status", "--redis", redisURL, "--crawl", "t")
	if code != exitOK || !strings.Contains(out, "damaged counter read as 0") || !strings.Contains(out, counts+" field queued") {
		t.Errorf("crawl status --redis with a negative counter: exit %d,\n%s\n%q; want the counter named", code, out, errOut)
	}
}

// A worker meets unreadable items in a host's queue and in a partition's in-flight set, a
// negative counter, a counter that is not a number, a damaged seen log and learned states
// cut short or inflating far past their bound (those two were refused before too), and still crawls
// every page and ends, saying what it set aside. Before, the bad item stopped every round as
// "Redis unreachable" (the worker never ended), the negative count kept the crawl from ever
// being idle, and the seen-set's count kept Redis busy for good.
func TestFleetWorkerSurvivesHostileRedis(t *testing.T) {
	t.Parallel()
	specs := []simweb.HostSpec{{Name: "h0", Pages: 20, CrossLinks: []string{"h1"}}, {Name: "h1", Pages: 20, CrossLinks: []string{"h2"}}, {Name: "h2", Pages: 20}}
	f := newFleet(t, specs, steadyLease)
	ctx := context.Background()
	hostOf := func(name string) string {
		u, err := url.Parse(f.web.URL(name))
		if err != nil {
			t.Fatal(err)
		}
		return u.Host
	}
	key := func(host, name string) string {
		p := fleet.PartitionOf(host, 64)
		return "crawl:t:{" + strconv.Itoa(p) + "}:" + name
	}
	f.rdb.Set(ctx, "crawl:t:config", "partitions=64 seen=log items=bin1 active-set", 0)
	h0, h1, h2 := hostOf("h0"), hostOf("h1"), hostOf("h2")
	mark := func(host string) { f.rdb.SAdd(ctx, "crawl:t:active", fleet.PartitionOf(host, 64)) }
	// h0: garbage at the head of its queue, listed in its partition's hosts
	f.rdb.RPush(ctx, key(h0, "q:"+h0), "\xff\x1b[2J", "\x80", "")
	f.rdb.SAdd(ctx, key(h0, "hosts"), h0)
	f.rdb.HSet(ctx, key(h0, "counts"), "fetched", "lots")
	mark(h0)
	// h1: an in-flight member that cannot be read, long past its deadline, and a seen log
	// that is not a list
	f.rdb.ZAdd(ctx, key(h1, "inflight"), redis.Z{Score: 1, Member: "\x09nohost"})
	f.rdb.HSet(ctx, key(h1, "counts"), "queued", "1", "inflight", "1")
	f.rdb.Set(ctx, key(h1, "sl"), "\x01\x02\x03", 0)
	mark(h1)
	// h2: a negative count, and a learned state cut short
	f.rdb.HSet(ctx, key(h2, "counts"), "queued", "-5", "delayed", "x")
	f.rdb.Set(ctx, key(h2, "h:"+h2), "\x01\xff\xfe", 0)
	mark(h2)
	// h0's learned state: a DEFLATE bomb (16 MiB of zeros, 256 times the bound)
	var bomb bytes.Buffer
	bomb.WriteByte(1)
	zw, _ := flate.NewWriter(&bomb, flate.BestCompression)
	zeros := make([]byte, 1<<20)
	for range 16 {
		zw.Write(zeros)
	}
	zw.Close()
	f.rdb.Set(ctx, key(h0, "h:"+h0), bomb.Bytes(), 0)

	w := f.start("")
	f.finish(w)
	f.checkComplete(0)
	f.idleInRedis()
	out := w.out.String()
	if bad := unreachableNotTimedOut(out); !strings.Contains(out, "set aside") || !strings.Contains(out, "recounted") || len(bad) > 0 {
		t.Errorf("worker's output:\n%s\nwant the values set aside and the counters recounted named, no \"Redis unreachable\" but for a call that timed out; got %q", out, bad)
	}
}

// unreachableNotTimedOut returns the worker's "Redis unreachable" warnings in out whose cause is not a
// call that timed out. A loaded machine may starve Redis or the worker past a call's bound
// (redisTimeout), which the worker rides out as an outage; any other cause (a value it cannot
// read, taken for a lost link) is a defect.
func unreachableNotTimedOut(out string) []string {
	var bad []string
	for line := range strings.Lines(out) {
		if strings.Contains(line, "Redis unreachable") && !strings.Contains(line, context.DeadlineExceeded.Error()) && !strings.Contains(line, "i/o timeout") {
			bad = append(bad, strings.TrimSpace(line))
		}
	}
	return bad
}
