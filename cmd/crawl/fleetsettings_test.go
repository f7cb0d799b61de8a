package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/crawl-project/crawl/internal/crawler"
	"github.com/crawl-project/crawl/internal/redistest"
	"github.com/crawl-project/crawl/internal/simweb"
	"github.com/redis/go-redis/v9"
)

// startBare starts a worker as the README shows a second one: on a new data directory, with
// no seeds and none of the crawl's settings, only what joins it (Redis, the crawl's name, and
// the fleet flags every worker must be given alike).
func (f *fleetRun) startBare() *worker {
	f.t.Helper()
	args := []string{"run", "--data", f.t.TempDir(), "--redis", f.url, "--crawl", "t", "--quiet",
		"--lease-ttl", f.ttl.String(), "--partitions", "64"}
	out := &syncBuffer{}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "CRAWL_AS_MAIN=1")
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		f.t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	w := &worker{name: fmt.Sprintf("bare worker %d (pid %d)", len(f.workers), cmd.Process.Pid), dir: args[2], cmd: cmd, out: out, exited: make(chan struct{})}
	go func() { cmd.Wait(); close(w.exited) }()
	f.workers = append(f.workers, w)
	return w
}

// waitOutput waits until w has printed want.
func (f *fleetRun) waitOutput(w *worker, want string) {
	f.t.Helper()
	for !strings.Contains(w.out.String(), want) {
		select {
		case <-f.ctx.Done():
			f.t.Fatalf("%s never said %q:\n%s", w.name, want, w.out)
		case <-w.exited:
			f.t.Fatalf("%s exited before it said %q:\n%s", w.name, want, w.out)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// cappedWeb is hosts hosts of 30 pages each, linked in a ring.
func cappedWeb(hosts int) []simweb.HostSpec {
	specs := make([]simweb.HostSpec, hosts)
	for i := range specs {
		specs[i] = simweb.HostSpec{Name: fmt.Sprintf("h%d", i), Pages: 30, CrossLinks: []string{fmt.Sprintf("h%d", (i+1)%hosts)}}
	}
	return specs
}

// checkCapped fails the test unless every host served exactly cap distinct pages (the cap
// held, and every URL it admitted was fetched), and Redis counts no URL failed or excluded
// private-address. It returns how many pages the worker w says it fetched.
func (f *fleetRun) checkCapped(cap int, w *worker) int {
	f.t.Helper()
	for name, s := range f.web.Stats() {
		if len(s.Fetched) != cap {
			f.t.Errorf("host %s: %d pages fetched, want the crawl's --max-host-pages %d", name, len(s.Fetched), cap)
		}
		if s.PeakInFlight > fleetHostConcurrency {
			f.t.Errorf("host %s: %d requests in flight at once; the crawl's --host-concurrency is %d", name, s.PeakInFlight, fleetHostConcurrency)
		}
	}
	keys, err := f.keys(f.ctx, "crawl:t:{*}:counts")
	if err != nil {
		f.t.Fatal(err)
	}
	private, failed := 0, 0
	for _, k := range keys {
		m, err := f.rdb.HGetAll(f.ctx, k).Result()
		if err != nil {
			f.t.Fatal(err)
		}
		n, _ := strconv.Atoi(m["excluded:private-address"])
		private += n
		n, _ = strconv.Atoi(m["failed"])
		failed += n
	}
	if private > 0 || failed > 0 {
		f.t.Errorf("%d URLs excluded private-address, %d failed; want none", private, failed)
	}
	m := regexp.MustCompile(`this worker (\d+) fetched`).FindStringSubmatch(w.out.String())
	if m == nil {
		f.t.Fatalf("%s: no summary of its own pages:\n%s", w.name, w.out)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// A second worker started as the README shows it, with no flags but those that join the crawl,
// crawls with the shared crawl's settings, not its own defaults: its hosts keep the crawl's
// --max-host-pages and --max-rate, and it says which settings it took.
func TestFleetJoinerKeepsCrawlSettings(t *testing.T) {
	t.Parallel()
	// At 2 requests/s a host's 12 pages and robots.txt take 6 s: time for a second process,
	// started after the crawl's first page, to take a share on a loaded machine.
	const (
		hostCap = 12
		maxRate = 2.0
	)
	f := newFleet(t, cappedWeb(16), steadyLease, "--max-rate", "2", "--initial-rate", "2", "--max-host-pages", strconv.Itoa(hostCap))
	first := f.start("")
	f.waitServed(1) // its seeds are in; 16 hosts: its share holds one but for (1/2)^16
	second := f.startBare()
	f.finish(first, second)
	if !strings.Contains(second.out.String(), "taking its") || !strings.Contains(second.out.String(), "--max-rate 2") ||
		!strings.Contains(second.out.String(), "--max-host-pages 12") {
		t.Errorf("%s does not say it took the crawl's settings:\n%s", second.name, second.out)
	}
	if n := f.checkCapped(hostCap, second); n == 0 {
		t.Fatalf("%s fetched no page: it never held a host, the test shows nothing", second.name)
	} else {
		t.Logf("%s fetched %d pages", second.name, n)
	}
	// Each host's requests (robots.txt included) were paced at --max-rate by one worker at a
	// time; a host that moved between the workers may have had one more.
	for name, s := range f.web.Stats() {
		span := s.LastRequest.Sub(s.FirstRequest)
		if min := time.Duration(float64(s.Requests-2) / maxRate * float64(time.Second)); span < min {
			t.Errorf("host %s: %d requests in %v; at the crawl's --max-rate %g they take at least %v", name, s.Requests, span.Round(time.Millisecond), maxRate, min)
		}
	}
}

// Three workers started together on a real 3-master Redis Cluster, two given the seeds and the
// crawl's settings and one given neither: the third waits for the crawl, takes its settings and
// its network scope (the seeds' loopback block), and the crawl completes: every host's page cap
// held, every URL it admitted fetched, none excluded private-address.
func TestFleetClusterWorkerWithoutSeeds(t *testing.T) {
	t.Parallel()
	const hostCap = 15
	c := redistest.StartCluster(t, 3, 0)
	// The bare worker starts first and is waiting for the crawl when the others start it, so
	// that it joins as they do, not after the crawl (a loaded machine can delay a process's
	// start by seconds). At 2 requests/s a host takes 7.5 s: time for it to take its share.
	// With 24 hosts, the chance that its share of partitions holds none of them is (2/3)^24,
	// 6e-5.
	f := newClusterFleet(t, c, cappedWeb(24), steadyLease, "--max-host-pages", strconv.Itoa(hostCap), "--max-rate", "2", "--initial-rate", "2")
	bare := f.startBare()
	f.waitOutput(bare, "waiting for a worker given seeds")
	ws := []*worker{bare, f.start(""), f.start("")}
	f.finish(ws...)
	if n := f.checkCapped(hostCap, bare); n == 0 {
		t.Errorf("%s fetched no page: it never held a host, the test shows nothing:\n%s", bare.name, bare.out)
	} else {
		t.Logf("%s fetched %d pages", bare.name, n)
	}
	f.idleInRedis()
}

// A worker given a crawl setting other than the shared crawl's is refused before it crawls,
// naming the crawl's value and its own; so is every worker of a crawl whose settings record in
// Redis is damaged or hostile, rather than crawling with its own flags.
func TestFleetSettingsRefused(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { rdb.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := crawler.Defaults()
	cfg.MaxRate = 30
	good := crawler.EncodeCrawlSettings(cfg.CrawlSettings())
	for _, tc := range []struct {
		name, record string
		args         []string
		want         string
	}{
		{"another --max-rate", good, []string{"--max-rate", "50"}, "the shared crawl was started with --max-rate 30, not --max-rate 50"},
		{"another --max-rate, no seeds", good, nil, "the shared crawl was started with --max-rate 30, not --max-rate 50"},
		{"damaged record", "\x18{", nil, `shared crawl "t": bad settings record`},
		{"hostile rate", strings.Replace(good, `"max_rate":30`, `"max_rate":-1`, 1), nil, "bad settings record: --max-rate (-1) must not be below --min-rate"},
	} {
		if err := rdb.Set(ctx, "crawl:t:shared:settings", tc.record, 0).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.Set(ctx, "crawl:t:shared:seeded", "1", 0).Err(); err != nil {
			t.Fatal(err)
		}
		args := []string{"run", "--data", t.TempDir(), "--redis", srv.URL(), "--crawl", "t", "--partitions", "64"}
		if !strings.Contains(tc.name, "no seeds") {
			args = append(args, "http://127.0.0.1:9/")
		}
		if tc.args == nil && strings.Contains(tc.name, "--max-rate") {
			tc.args = []string{"--max-rate", "50"}
		}
		code, out := crawlOutput(t, ctx, append(args, tc.args...)...)
		if code != exitUsage || !strings.Contains(out, tc.want) {
			t.Errorf("%s: exit %d, want %d saying %q:\n%s", tc.name, code, exitUsage, tc.want, out)
		}
	}
}

// A worker given seeds and a flag no crawl may run with is refused before it creates the
// shared crawl: it stores no settings that every later worker would have to refuse.
func TestFleetBadFlagStoresNoSettings(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { rdb.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code, out := crawlOutput(t, ctx, "run", "--data", t.TempDir(), "--redis", srv.URL(), "--crawl", "t", "--partitions", "64",
		"--robots-ttl", "1ns", "http://127.0.0.1:9/")
	if code != exitUsage || !strings.Contains(out, "--robots-ttl must be at least") {
		t.Errorf("exit %d, want %d saying what is wrong with --robots-ttl:\n%s", code, exitUsage, out)
	}
	if n, err := rdb.Exists(ctx, "crawl:t:shared:settings").Result(); err != nil || n != 0 {
		t.Errorf("settings stored by a worker that could not run: %d, %v", n, err)
	}
}
