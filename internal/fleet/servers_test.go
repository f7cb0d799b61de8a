package fleet

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/crawl-project/crawl/frontier"
	"github.com/crawl-project/crawl/internal/redistest"
	"github.com/redis/go-redis/v9"
)

func TestParseVersion(t *testing.T) {
	for _, c := range []struct {
		in   string
		want version
		ok   bool
	}{
		{"7.0.15", version{7, 0}, true},
		{"6.2.0", version{6, 2}, true},
		{"6.2", version{6, 2}, true},
		{"255.255.255", version{255, 255}, true}, // an unstable build
		{"10.1.2-rc1", version{10, 1}, true},
		{"", version{}, false},
		{"7", version{}, false},
		{"x.y.z", version{}, false},
		{"-1.2.3", version{}, false},
		{"7.\x1b[31m.0", version{}, false},
	} {
		got, err := parseVersion(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("parseVersion(%q) = %v, %v; want %v, ok=%v", c.in, got, err, c.want, c.ok)
		}
	}
}

func TestCheckVersion(t *testing.T) {
	for _, c := range []struct {
		version string
		want    string // "" accepted, else the error
	}{
		{"7.0.15", ""},
		{"6.2.0", ""},
		{"7.2.4", ""}, // Valkey 8 reports redis_version:7.2.4
		{"10.0.0", ""},
		{"6.0.16", "redis 6.0.16 at 127.0.0.1:6379: the shared crawl needs Redis 6.2 or later"},
		{"5.0.7", "redis 5.0.7 at 127.0.0.1:6379: the shared crawl needs Redis 6.2 or later"},
		{"6.0.\x1b]0;owned\a", `redis 6.0.\x1b]0;owned\x07 at 127.0.0.1:6379: the shared crawl needs Redis 6.2 or later`},
		{"", `127.0.0.1:6379: redis_version "" is not MAJOR.MINOR[.PATCH]`},
		{strings.Repeat("9", 100), `127.0.0.1:6379: redis_version "` + strings.Repeat("9", 40) + `…" is not MAJOR.MINOR[.PATCH]`},
	} {
		err := server{Addr: "127.0.0.1:6379", Version: c.version}.checkVersion()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q refused: %v", c.version, err)
		case c.want != "" && (err == nil || err.Error() != c.want):
			t.Errorf("%q: got %v, want %q", c.version, err, c.want)
		}
		if strings.HasPrefix(c.want, "redis ") && !errors.Is(err, ErrServerTooOld) {
			t.Errorf("%q: %v is not ErrServerTooOld", c.version, err)
		}
	}
}

func TestParseServerInfo(t *testing.T) {
	info := "# Server\r\nredis_version:7.0.15\r\nredis_git_sha1:00000000\r\nrun_id:8d3c1f\r\ntcp_port:6379\r\n"
	got := parseServerInfo("h:1", info)
	if got != (server{Addr: "h:1", Version: "7.0.15", RunID: "8d3c1f"}) {
		t.Errorf("got %+v", got)
	}
}

// Open reads the real server's version and run_id, and accepts it (7.0.15 here).
func TestOpenReadsTheServer(t *testing.T) {
	parallel(t)
	rdb := newRedis(t)
	s := newStore(t, rdb, "a", nil)
	svs, err := s.readServers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(svs) == 0 {
		t.Fatal("no server read")
	}
	for _, sv := range svs {
		if _, err := parseVersion(sv.Version); err != nil || sv.RunID == "" || sv.checkVersion() != nil {
			t.Errorf("server %+v: version %v, check %v", sv, err, sv.checkVersion())
		}
	}
	if addr, complete, err := s.restarted(context.Background()); addr != "" || !complete || err != nil {
		t.Errorf("restarted() = %q, %v, %v with no restart", addr, complete, err)
	}
}

// A node that does not answer is not read (the read is not complete, and names it), keeps its
// last run_id, and is found restarted once it answers with a new one.
func TestRestartedAfterNodeUnreachable(t *testing.T) {
	parallel(t)
	rdb, srv := newRedisServer(t)
	s := newStore(t, rdb, "a", nil)
	ctx := context.Background()
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	addr, complete, err := s.restarted(ctx)
	if addr != "" || complete || err == nil || !strings.Contains(err.Error(), srv.Addr) {
		t.Fatalf("restarted() with the node down = %q, %v, %v; want incomplete, naming %s", addr, complete, err, srv.Addr)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		addr, complete, err = s.restarted(ctx)
		if complete {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node not read 30 s after its restart: %v", err)
		}
	}
	if addr != srv.Addr {
		t.Errorf("restarted() after the restart = %q, want %s", addr, srv.Addr)
	}
}

// The links recentLinks leaves out wait for confirmation: those left out before a mark are
// confirmed by it, a restart takes them all (and empties the memory), and once maxUnconfirmed
// wait, nothing more is left out.
func TestRecentLinksUnconfirmed(t *testing.T) {
	r := newRecentLinks(1 << 20)
	e := func(u string) frontier.Entry { return frontier.Entry{URL: u, Host: "h"} }
	page := func(urls ...string) frontier.Result {
		res := frontier.Result{Kind: frontier.Fetched}
		for _, u := range urls {
			res.Links = append(res.Links, e(u))
		}
		return res
	}
	_, fps := r.filter(page("http://h/a", "http://h/b"))
	r.remember(fps)
	if r.pending() {
		t.Fatal("pending with nothing left out")
	}
	got, _ := r.filter(page("http://h/a", "http://h/a", "http://h/c"))
	if len(got.Links) != 1 || !r.pending() {
		t.Fatalf("kept %v, pending %v; want c kept and a waiting once", got.Links, r.pending())
	}
	m := r.mark()
	r.filter(frontier.Result{Kind: frontier.Fetched, Links: []frontier.Entry{e("http://h/b")}, Excluded: []frontier.Exclusion{{Entry: e("http://h/c"), Reason: "robots"}}})
	r.confirm(m) // a confirmed; b and c left out after the mark still wait
	d := r.takeAll()
	if len(d.links) != 1 || d.links[0].URL != "http://h/b" || len(d.excluded) != 1 || d.excluded[0].URL != "http://h/c" || r.pending() {
		t.Fatalf("took %+v (pending %v); want b and the exclusion of c", d, r.pending())
	}
	if got, _ := r.filter(page("http://h/a", "http://h/b")); len(got.Links) != 2 {
		t.Fatalf("after a restart kept %v, want a and b sent again", got.Links)
	}
	// full: links known recorded are sent rather than left out unconfirmed
	r.takeAll()
	urls := make([]string, 2*maxUnconfirmed) // more than maxUnconfirmed stay remembered
	for i := range urls {
		urls[i] = "http://h/" + strconv.Itoa(i)
	}
	_, fps = r.filter(page(urls...))
	r.remember(fps)
	got, _ = r.filter(page(urls...))
	if n := r.takeAll().len(); n != maxUnconfirmed || len(got.Links) != len(urls)-maxUnconfirmed {
		t.Fatalf("full: %d left out, %d kept; want %d left out, the rest kept", n, len(got.Links), maxUnconfirmed)
	}
}

// startStop runs f.Run until the returned stop is called (or the test ends).
func startStop(t *testing.T, f *Frontier) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.Run(ctx) }()
	stop = func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("Frontier.Run did not return after its context was cancelled")
		}
	}
	t.Cleanup(stop)
	return stop
}

// copyAOF copies the append-only files of directory from (appendonlydir/ since Redis 7,
// appendonly.aof before) into directory to, replacing those there.
func copyAOF(t *testing.T, from, to string) {
	t.Helper()
	olds, _ := filepath.Glob(filepath.Join(to, "appendonly*"))
	for _, old := range olds {
		if err := os.RemoveAll(old); err != nil {
			t.Fatal(err)
		}
	}
	err := filepath.WalkDir(from, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		if rel != "." && !strings.HasPrefix(rel, "appendonly") {
			return nil
		}
		dst := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Redis restarts from a state older than what the worker saw it record, and no call of the
// worker fails on it (go-redis sends the next command on a new connection by itself): the
// worker must learn of it from the server's new run_id, and send again the links it left out
// as recorded, which the restart lost, and mark again active the partitions it marked (the
// restart lost the mark of the links' partition too). Without that, the link is never queued.
func TestFrontierSendsAgainAfterSilentRestart(t *testing.T) {
	parallel(t)
	rdb, srv := newRedisServer(t)
	ctx := context.Background()
	// every write is on disk before its reply, so a copy of the append-only files made while
	// nothing writes is the state at that instant
	if err := rdb.ConfigSet(ctx, "appendfsync", "always").Err(); err != nil {
		t.Fatal(err)
	}
	s := newStore(t, rdb, "a", &Options{Partitions: 2, LeaseTTL: time.Minute})
	hostB := "b" // a host of the partition a's page links to, the other one
	for i := 0; PartitionOf(hostB, 2) == PartitionOf("a", 2); i++ {
		hostB = "b" + strconv.Itoa(i)
	}
	pB := PartitionOf(hostB, 2)
	f := NewFrontier(s.NewKeeper(), FrontierOptions{Refresh: 10 * time.Millisecond})
	stop := startStop(t, f)
	if _, err := f.Add([]frontier.Entry{{URL: "http://a/0", Host: "a"}, {URL: "http://a/1", Host: "a"}, {URL: "http://a/2", Host: "a"}}); err != nil {
		t.Fatal(err)
	}
	l0, l1, l2 := leaseOne(t, f, "a"), leaseOne(t, f, "a"), leaseOne(t, f, "a")
	stop()

	// the state Redis will come back with: the URLs in flight, no link recorded
	before := t.TempDir()
	copyAOF(t, srv.Dir, before)

	stop = startStop(t, f)
	link := []frontier.Entry{{URL: "http://" + hostB + "/0", Host: hostB, Depth: 1}}
	other := []frontier.Entry{{URL: "http://" + hostB + "/1", Host: hostB, Depth: 1}}
	if err := f.Complete(l0, frontier.Result{Kind: frontier.Fetched, Links: append(link, other...)}); err != nil {
		t.Fatal(err)
	}
	queueB := s.k.queue(pB, hostB)
	waitQueued := func(want int64, after string) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			n, err := rdb.LLen(ctx, queueB).Result()
			if err != nil {
				t.Fatal(err)
			}
			if n == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("b's queue holds %d URLs 30 s %s, want %d (stats %+v)", n, after, want, f.Stats())
			}
		}
	}
	waitQueued(2, "after the first page (forwarded from its outbox)")
	stop()

	// the restart: stopped, its files replaced by the earlier copy, started on the same port
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	copyAOF(t, before, srv.Dir)
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	if n, err := rdb.LLen(ctx, queueB).Result(); err != nil || n != 0 {
		t.Fatalf("b's queue holds %d URLs (%v) after the restart, want none (the earlier state)", n, err)
	}
	if in, err := rdb.SIsMember(ctx, s.k.active(), pB).Result(); err != nil || in {
		t.Fatalf("b's partition active after the restart: %v, %v; want not (the earlier state)", in, err)
	}

	// a page completed before the worker looks at the servers again: its link is left out
	// as recorded, and the call succeeds
	if err := f.Complete(l1, frontier.Result{Kind: frontier.Fetched, Links: link}); err != nil {
		t.Fatal(err)
	}
	if st := f.Stats(); st.Outages != 0 || st.Refused != 0 {
		t.Fatalf("stats %+v: a call failed or was refused, so this is not a silent restart", st)
	}
	startStop(t, f)
	waitQueued(1, "after the restart: the link is lost")
	if st := f.Stats(); st.Restarts != 1 || st.Outages != 0 {
		t.Errorf("stats %+v; want one restart found, no outage", st)
	}
	// its partition is in the active set again, so workers read it and the crawl is not idle
	if in, err := rdb.SIsMember(ctx, s.k.active(), pB).Result(); err != nil || !in {
		t.Errorf("b's partition not active again after the restart (%v): never read", err)
	}
	// a page completed after the worker found the restart sends the other link, recorded
	// before the restart and lost with it: the worker forgot what it saw recorded
	if err := f.Complete(l2, frontier.Result{Kind: frontier.Fetched, Links: other}); err != nil {
		t.Fatal(err)
	}
	waitQueued(2, "after a page sent the other link")
}

// Open refuses a Redis older than 6.2 at once, naming its address and version, rather than
// failing later on the first script that uses a newer command.
func TestOpenRefusesOldRedis(t *testing.T) {
	parallel(t)
	addr := redistest.StartOld(t, "6.0.16")
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer rdb.Close()
	_, err := Open(context.Background(), rdb, "t", "a", nil)
	want := "redis 6.0.16 at " + addr + ": the shared crawl needs Redis 6.2 or later"
	if err == nil || err.Error() != want || !errors.Is(err, ErrServerTooOld) {
		t.Fatalf("Open: %v; want %q", err, want)
	}
}
