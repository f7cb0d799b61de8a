package main

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/crawl-project/crawl/frontier"
	"github.com/crawl-project/crawl/internal/crawler"
	"github.com/crawl-project/crawl/internal/fleet"
	"github.com/crawl-project/crawl/internal/redistest"
	"github.com/crawl-project/crawl/internal/refused"
)

// jsonKeys returns the top-level keys of the JSON object b.
func jsonKeys(t *testing.T, b []byte) []string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%v in %s", err, b)
	}
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// A shared crawl with two workers (one holding every partition and reporting, one only
// reporting) and a few pages done: crawl status --redis shows the totals under today's keys
// plus workers, as JSON and as text.
func TestStatusRedis(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	opts := &fleet.Options{Partitions: 4, LeaseTTL: time.Minute} // alive through a slow run
	a, err := fleet.Open(ctx, rdb, "shared", "worker-a", opts)
	if err != nil {
		t.Fatal(err)
	}
	b, err := fleet.Open(ctx, rdb, "shared", "worker-b", opts)
	if err != nil {
		t.Fatal(err)
	}
	k := a.NewKeeper()
	if _, err := k.Tick(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	var es []frontier.Entry
	for i := range 6 {
		es = append(es, frontier.Entry{URL: fmt.Sprintf("http://h%d.example/", i%3), Host: fmt.Sprintf("h%d.example", i%3)})
		es = append(es, frontier.Entry{URL: fmt.Sprintf("http://h%d.example/%d", i%3, i), Host: fmt.Sprintf("h%d.example", i%3)})
	}
	if _, err := a.Add(ctx, es); err != nil {
		t.Fatal(err)
	}
	done := 0
	for _, o := range k.Owned(time.Now()) {
		hosts, err := a.Hosts(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range hosts {
			l, ok, _, err := a.Take(ctx, o, h)
			if err != nil || !ok {
				t.Fatalf("take %s: %v %v", h, ok, err)
			}
			r := frontier.Result{Kind: frontier.Fetched}
			if done == 0 {
				r = frontier.Result{Kind: frontier.Failed, Reason: "http-404"}
			}
			if err := a.Complete(ctx, o, l, r); err != nil {
				t.Fatal(err)
			}
			done++
		}
	}
	if err := a.Report(ctx, fleet.WorkerReport{Pages: int64(done - 1), Host: "m1", Data: "/var/crawl"}); err != nil {
		t.Fatal(err)
	}
	if err := b.Report(ctx, fleet.WorkerReport{Pages: 0, Host: "m2", Data: "/var/crawl2"}); err != nil {
		t.Fatal(err)
	}

	code, out, errOut := crawlCmd(t, "", "status", "--redis", srv.URL(), "--crawl", "shared", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var st fleetStatus
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	today, _ := json.Marshal(crawler.Status{FailedBy: map[string]int{}, ExcludedBy: map[string]int{}, Hosts: []crawler.HostStatus{}})
	got := jsonKeys(t, []byte(out))
	for _, key := range append(jsonKeys(t, today), "workers") {
		if !slices.Contains(got, key) {
			t.Errorf("key %q missing from %v", key, got)
		}
	}
	if st.Fetched != done-1 || st.Failed != 1 || st.Queued != 9-done || st.FailedBy["http-404"] != 1 || !st.Running {
		t.Errorf("totals %+v: want %d fetched, 1 failed, %d queued, running", st.Status, done-1, 9-done)
	}
	if len(st.Workers) != 2 || st.WorkersAlive != 1 || st.Partitions != 4 || st.PartitionsFree != 0 {
		t.Fatalf("workers %+v (%d alive), partitions %d (%d free)", st.Workers, st.WorkersAlive, st.Partitions, st.PartitionsFree)
	}
	wa, wb := st.Workers[0], st.Workers[1]
	if wa.ID != "worker-a" || wa.State != fleet.WorkerAlive || !slices.Equal(wa.Partitions, []int{0, 1, 2, 3}) ||
		wa.Pages != int64(done-1) || wa.Heartbeat == nil || wa.Data != "/var/crawl" {
		t.Errorf("worker a: %+v", wa)
	}
	if wb.ID != "worker-b" || wb.State != fleet.WorkerGone || len(wb.Partitions) != 0 || wb.Heartbeat != nil {
		t.Errorf("worker b (reported, never heartbeat): %+v", wb)
	}

	code, out, errOut = crawlCmd(t, "", "status", "--redis", srv.URL(), "--crawl", "shared")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		`crawl "shared" in the Redis at ` + srv.Addr + ` (database 0): running (1 worker alive)`,
		fmt.Sprintf("fetched %d  failed 1  excluded 0  queued %d  in flight 0", done-1, 9-done),
		"failed by reason: http-404 1",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	if !regexp.MustCompile(`(?m)^worker-a +alive +4 +`+fmt.Sprint(done-1)+` +\d+\.\ds ago +m1:/var/crawl$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^worker-b +gone +0 +0 +- +m2:/var/crawl2$`).MatchString(out) {
		t.Errorf("worker lines wrong:\n%s", out)
	}

	code, _, errOut = crawlCmd(t, "", "status", "--redis", srv.URL(), "--crawl", "other")
	if code != exitRuntime || !strings.Contains(errOut, `no crawl "other" in the Redis at `+srv.Addr) {
		t.Errorf("unknown crawl: exit %d, %q", code, errOut)
	}
}

// Redis unreachable: exit 2 with the address and the cause; a malformed URL is a usage error.
func TestStatusRedisUnreachable(t *testing.T) {
	addr := refused.Addr(t)
	code, out, errOut := crawlCmd(t, "", "status", "--redis", "redis://"+addr+"/0", "--json")
	if code != exitUsage || out != "" || !strings.Contains(errOut, "Redis at "+addr+" unreachable") || !strings.Contains(errOut, "connection refused") {
		t.Errorf("exit %d, stdout %q, stderr %q: want 2 naming %s and the refusal", code, out, errOut, addr)
	}
	if n := strings.Count(errOut, "\n"); n != 1 {
		t.Errorf("stderr has %d lines, want the one that says it: %q", n, errOut)
	}
	code, _, errOut = crawlCmd(t, "", "status", "--redis", "http://"+addr)
	if code != exitUsage || !strings.Contains(errOut, "--redis") {
		t.Errorf("bad URL: exit %d, %q", code, errOut)
	}
	code, _, _ = crawlCmd(t, "", "status", "--redis", "redis://"+addr+"/0", "--data", t.TempDir())
	if code != exitUsage {
		t.Errorf("--redis with --data: exit %d, want 2", code)
	}
}
