package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/crawl-project/crawl/internal/fleet"
	"github.com/crawl-project/crawl/internal/redistest"
	"github.com/crawl-project/crawl/internal/simweb"
	"github.com/crawl-project/crawl/storage"
	"github.com/redis/go-redis/v9"
)

// These tests run real `crawl run --redis` worker processes against a real redis-server
// (internal/redistest: they fail rather than skip without one under CI=true) over the
// simulated web, whose servers count every request, duplicate fetch and the most requests to a
// host in flight at once.

// shortLease is short so that a dead or stopped worker's hosts move within a test; steadyLease
// is long enough that no lease lapses while 2 cores run several tests' workers under -race
// (a lapse hands a host over, and the requests it cut short are fetched again).
const (
	shortLease  = time.Second
	steadyLease = 5 * time.Second
)

// A fleet test fails when its workers make no progress for fleetStall (no page served, no
// worker exited: a hang, whose state it then dumps), or at the latest after fleetDeadline.
// Neither bounds how long a crawl that progresses may take: the politeness web alone takes
// 75-100 s at its hosts' limits, and longer on a loaded machine.
const (
	fleetStall    = time.Minute
	fleetDeadline = 5 * time.Minute
)

// fleetHostConcurrency is each worker's --host-concurrency; simweb's PeakInFlight of a host
// must never exceed it across the fleet (one owner at a time).
const fleetHostConcurrency = 2

// fleetWeb is a small web whose hosts are rate-limited or slow, so that a crawl takes a few
// seconds and signals land mid-crawl, with requests in flight on every worker.
func fleetWeb() []simweb.HostSpec {
	var specs []simweb.HostSpec
	for i := range 9 {
		s := simweb.HostSpec{Name: fmt.Sprintf("h%d", i), Pages: 40, CrossLinks: []string{fmt.Sprintf("h%d", (i+1)%9)}}
		switch i % 3 {
		case 0:
			s.Limit, s.Burst, s.Reply = 30, 2, simweb.Reply429Seconds
		case 1:
			s.Workers, s.Service = 4, 40*time.Millisecond
		case 2:
			s.Service = 20 * time.Millisecond
			s.Disallow = []string{"/p3"}
		}
		specs = append(specs, s)
	}
	return specs
}

// fleet is one shared crawl under test: its Redis, its web, its seed file, its workers.
type fleetRun struct {
	t   *testing.T
	ctx context.Context
	srv *redistest.Server // nil on a cluster
	url string            // the workers' --redis
	rdb redis.UniversalClient
	web *simweb.Web
	// progress counts the requests the web served so far, for a web that is not a simweb
	// (nil: web's page 200s)
	progress func() int
	seeds    string
	args     []string
	ttl      time.Duration // the workers' --lease-ttl
	// requeues sees every return of a URL to its queue
	requeues *requeues

	mu      sync.Mutex
	workers []*worker
}

// worker is one `crawl run --redis` process.
type worker struct {
	name   string
	dir    string
	cmd    *exec.Cmd
	out    *syncBuffer
	exited chan struct{} // closed when the process has exited (cmd.ProcessState is then set)
}

// syncBuffer is a bytes.Buffer safe for the process's writes and the test's reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newFleet(t *testing.T, specs []simweb.HostSpec, ttl time.Duration, extra ...string) *fleetRun {
	t.Helper()
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { rdb.Close() })
	f := newFleetOn(t, srv.URL(), rdb, specs, ttl, extra...)
	f.srv = srv
	f.requeues = watchRequeues(t, "t", srv.Addr)
	return f
}

// newClusterFleet is newFleet on the Redis Cluster c: the workers are given its first node's
// URL only.
func newClusterFleet(t *testing.T, c *redistest.Cluster, specs []simweb.HostSpec, ttl time.Duration, extra ...string) *fleetRun {
	t.Helper()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), ClusterStateReloadInterval: 200 * time.Millisecond})
	t.Cleanup(func() { rdb.Close() })
	f := newFleetOn(t, c.URL(), rdb, specs, ttl, extra...)
	f.requeues = watchRequeues(t, "t", c.Addrs()...)
	return f
}

func newFleetOn(t *testing.T, url string, rdb redis.UniversalClient, specs []simweb.HostSpec, ttl time.Duration, extra ...string) *fleetRun {
	t.Helper()
	// The web judges each request's arrival by the kernel's receive time: the test process
	// serves every fleet test's web and reads their Redis MONITOR streams, and on a loaded
	// machine its handlers run late, which made paced requests seem to arrive together
	// (TestFleetPoliteness and TestFleetClusterPoliteness over 1% at load 9-22).
	web, err := simweb.Start(specs, &simweb.Options{Seed: 7, Grace: 50 * time.Millisecond, KernelArrival: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(web.Close)
	ctx, cancel := context.WithTimeout(context.Background(), fleetDeadline)
	t.Cleanup(cancel)
	f := &fleetRun{t: t, ctx: ctx, url: url, rdb: rdb, web: web, seeds: writeSeeds(t, web.Seeds()), ttl: ttl}
	f.args = append([]string{"--redis", url, "--crawl", "t", "--quiet", "--workers", "8",
		"--host-concurrency", strconv.Itoa(fleetHostConcurrency), "--initial-rate", "20",
		"--lease-ttl", ttl.String(), "--partitions", "64", "--seeds", f.seeds}, extra...)
	t.Cleanup(func() {
		for _, w := range f.all() {
			w.cmd.Process.Signal(syscall.SIGCONT)
			w.cmd.Process.Kill()
			<-w.exited
		}
	})
	return f
}

// start starts a worker on data directory dir (a new one if "").
func (f *fleetRun) start(dir string) *worker {
	f.t.Helper()
	if dir == "" {
		dir = f.t.TempDir()
	}
	out := &syncBuffer{}
	cmd := exec.Command(os.Args[0], append([]string{"run", "--data", dir}, f.args...)...)
	cmd.Env = append(os.Environ(), "CRAWL_AS_MAIN=1")
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		f.t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	w := &worker{name: fmt.Sprintf("worker %d (pid %d)", len(f.workers), cmd.Process.Pid), dir: dir, cmd: cmd, out: out, exited: make(chan struct{})}
	go func() { cmd.Wait(); close(w.exited) }()
	f.workers = append(f.workers, w)
	return w
}

func (f *fleetRun) all() []*worker {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*worker(nil), f.workers...)
}

// wait waits for w to exit and returns its exit code (-1 for a death by signal).
func (f *fleetRun) wait(w *worker) int {
	f.t.Helper()
	stalled := make(chan struct{})
	go func() { // closes stalled once nothing moved for fleetStall
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		last, lastAt := -1, time.Now()
		for {
			select {
			case <-w.exited:
				return
			case <-f.ctx.Done():
				return
			case now := <-t.C:
				n := f.served()
				for _, o := range f.all() {
					select {
					case <-o.exited:
						n++
					default:
					}
				}
				if n != last {
					last, lastAt = n, now
				} else if now.Sub(lastAt) >= fleetStall {
					close(stalled)
					return
				}
			}
		}
	}()
	select {
	case <-w.exited:
	case <-stalled:
		f.hung(w, fmt.Sprintf("nothing served and no worker exited for %v", fleetStall))
	case <-f.ctx.Done():
		f.hung(w, fmt.Sprintf("not done after %v", fleetDeadline))
	}
	return w.cmd.ProcessState.ExitCode()
}

// hung fails the test for worker w, which did not exit, with its output, the other workers'
// and the state of the crawl in Redis.
func (f *fleetRun) hung(w *worker, why string) {
	f.t.Helper()
	dump := f.dump()
	var others strings.Builder
	for _, o := range f.all() {
		if o != w {
			out := o.out.String()
			fmt.Fprintf(&others, "%s:\n%s\n", o.name, out[max(0, len(out)-4000):])
		}
	}
	w.cmd.Process.Signal(syscall.SIGQUIT) // its goroutines' stacks, to see where it waits
	select {
	case <-w.exited:
	case <-time.After(5 * time.Second):
	}
	f.t.Fatalf("%s did not exit (%s):\n%s\nRedis:\n%s\nthe other workers:\n%s", w.name, why, w.out, dump, &others)
}

// finish waits for the workers still running to exit 0.
func (f *fleetRun) finish(ws ...*worker) {
	f.t.Helper()
	for _, w := range ws {
		if code := f.wait(w); code != exitOK {
			f.t.Errorf("%s exited %d, want 0:\n%s", w.name, code, w.out)
		}
	}
}

// dump describes the partitions with work left, for a test that failed.
func (f *fleetRun) dump() string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var b strings.Builder
	keys, _ := f.keys(ctx, "crawl:t:{*}:counts")
	for _, k := range keys {
		m, _ := f.rdb.HGetAll(ctx, k).Result()
		if m["queued"] == "0" && m["outbox"] == "0" {
			continue
		}
		p := strings.TrimSuffix(k, "counts")
		owner, _ := f.rdb.Get(ctx, p+"owner").Result()
		inflight, _ := f.rdb.ZRangeWithScores(ctx, p+"inflight", 0, -1).Result()
		hosts, _ := f.rdb.SMembers(ctx, p+"hosts").Result()
		fmt.Fprintf(&b, "%s %v owner %q hosts %v in flight %v\n", k, m, owner, hosts, inflight)
	}
	workers, _ := f.rdb.ZRangeWithScores(ctx, "crawl:t:workers", 0, -1).Result()
	fmt.Fprintf(&b, "workers %v\n", workers)
	return b.String()
}

// keys lists the keys matching pattern (on every master of a cluster).
func (f *fleetRun) keys(ctx context.Context, pattern string) ([]string, error) {
	c, ok := f.rdb.(*redis.ClusterClient)
	if !ok {
		return f.rdb.Keys(ctx, pattern).Result()
	}
	var mu sync.Mutex
	var all []string
	err := c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
		ks, err := n.Keys(ctx, pattern).Result()
		mu.Lock()
		all = append(all, ks...)
		mu.Unlock()
		return err
	})
	return all, err
}

// served is how many page 200s the web has served so far (or f.progress's count).
func (f *fleetRun) served() int {
	if f.progress != nil {
		return f.progress()
	}
	n := 0
	for _, s := range f.web.Stats() {
		for _, c := range s.Fetched {
			n += c
		}
	}
	return n
}

// expected is how many pages the crawl must store.
func (f *fleetRun) expected() int {
	n := 0
	for _, urls := range f.web.Expected() {
		n += len(urls)
	}
	return n
}

// waitServed waits until the web has served at least n pages.
func (f *fleetRun) waitServed(n int) {
	f.t.Helper()
	for f.served() < n {
		select {
		case <-f.ctx.Done():
			f.t.Fatalf("the web served %d pages, waited for %d", f.served(), n)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// stored returns how many times each URL is stored with a 2xx status in the workers' stores.
func (f *fleetRun) stored() map[string]int {
	f.t.Helper()
	pages := map[string]int{}
	seen := map[string]bool{}
	for _, w := range f.all() {
		if seen[w.dir] {
			continue
		}
		seen[w.dir] = true
		db, err := storage.Open(w.dir, &storage.Options{ReadOnly: true, Timeout: 5 * time.Second})
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			f.t.Fatalf("%s: store: %v", w.name, err)
		}
		err = db.PagesMeta(func(p *storage.Page) error {
			if p.Status >= 200 && p.Status < 300 {
				pages[p.URL]++
			}
			return nil
		})
		db.Close()
		if err != nil {
			f.t.Fatalf("%s: %v", w.name, err)
		}
	}
	return pages
}

// checkStored fails the test unless every page of the web is stored in some worker's store
// and the servers saw no host with more requests in flight than one worker allows, nor a
// request robots.txt disallows; it returns how many times each URL is stored.
func (f *fleetRun) checkStored() map[string]int {
	f.t.Helper()
	pages := f.stored()
	want := 0
	for _, urls := range f.web.Expected() {
		want += len(urls)
		for _, u := range urls {
			if pages[u] == 0 {
				f.t.Errorf("%s never stored", u)
			}
		}
	}
	robots, hosts := 0, 0
	for name, s := range f.web.Stats() {
		robots += s.RobotsRequests
		hosts++
		if s.PeakInFlight > fleetHostConcurrency {
			f.t.Errorf("host %s: %d requests in flight at once; one worker at a time allows %d", name, s.PeakInFlight, fleetHostConcurrency)
		}
		if s.RobotsViolations > 0 {
			f.t.Errorf("host %s: %d requests for paths robots.txt disallows", name, s.RobotsViolations)
		}
	}
	f.t.Logf("%d pages; robots.txt requested %d times for %d hosts", want, robots, hosts)
	return pages
}

// checkComplete fails the test unless every page of the web is stored in some worker's
// store, and every URL served (or stored) k > 1 times was returned to its queue at least k-1
// times while the crawl ran (requeues): a lease handed over (a worker killed, stopped past its
// lease, or starved past it on a loaded machine: the new owner reclaims the URLs in flight) or
// given back (a request cut short). A URL fetched again with no such return is a double fetch
// without cause, whatever the load; lost allows that many, for a disruption that loses
// writes Redis acknowledged (a restart on a file missing its last second, a failover).
func (f *fleetRun) checkComplete(lost int) {
	f.t.Helper()
	pages := f.checkStored()
	back, _ := f.requeues.counts(f.ctx)
	twice, served, returned, unexplained := 0, 0, 0, 0
	var why []string
	for host, s := range f.web.Stats() {
		for _, u := range f.web.Expected()[host] {
			fetched, stored := s.Fetched[u], pages[u]
			if stored > 1 {
				twice++
			}
			if fetched > 1 {
				served += fetched - 1
			}
			if n := max(fetched, stored) - 1; n > back[u] {
				unexplained += n - back[u]
				why = append(why, fmt.Sprintf("%s served %d times, stored %d times, returned to its queue %d times", u, fetched, stored, back[u]))
			}
		}
	}
	for _, n := range back {
		returned += n
	}
	if unexplained > lost {
		f.t.Errorf("%d fetches again without cause (%d allowed for writes the disruption lost):\n%s", unexplained, lost, strings.Join(why[:min(len(why), 20)], "\n"))
	}
	f.t.Logf("%d stored twice, %d served again (%d without a return to the queue, %d allowed); URLs returned to their queues %d times", twice, served, unexplained, lost, returned)
}

// idleInRedis fails the test unless the shared crawl in Redis is over.
func (f *fleetRun) idleInRedis() {
	f.t.Helper()
	keys, err := f.keys(f.ctx, "crawl:t:{*}:counts")
	if err != nil {
		f.t.Fatal(err)
	}
	for _, k := range keys {
		m, err := f.rdb.HGetAll(f.ctx, k).Result()
		if err != nil {
			f.t.Fatal(err)
		}
		if m["queued"] != "0" && m["queued"] != "" || m["outbox"] != "0" && m["outbox"] != "" {
			f.t.Errorf("%s: %v; want nothing queued or waiting in the outbox", k, m)
		}
	}
}

// busiest returns the running worker owning the partition with the most URLs in flight.
func (f *fleetRun) busiest() *worker {
	f.t.Helper()
	for {
		keys, err := f.keys(f.ctx, "crawl:t:{*}:inflight")
		if err != nil {
			f.t.Fatal(err)
		}
		best, most := "", int64(0)
		for _, k := range keys {
			n, _ := f.rdb.ZCard(f.ctx, k).Result()
			if n > most {
				owner, _ := f.rdb.Get(f.ctx, strings.TrimSuffix(k, "inflight")+"owner").Result()
				best, most = owner, n
			}
		}
		for _, w := range f.all() {
			if best != "" && strings.Contains(best, fmt.Sprintf("-%d-", w.cmd.Process.Pid)) {
				return w
			}
		}
		select {
		case <-f.ctx.Done():
			f.t.Fatal("no worker had URLs in flight")
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// stopFetching stops (SIGSTOP) a worker at a moment a host it owns has a request of it inside
// the web's handler, so that it has a result to send when it is continued.
func (f *fleetRun) stopFetching() *worker {
	f.t.Helper()
	for {
		for name, s := range f.web.Stats() {
			if s.InFlight == 0 {
				continue
			}
			u, err := url.Parse(f.web.URL(name))
			if err != nil {
				f.t.Fatal(err)
			}
			owner, _ := f.rdb.Get(f.ctx, fmt.Sprintf("crawl:t:{%d}:owner", fleet.PartitionOf(u.Host, 64))).Result()
			for _, w := range f.all() {
				if owner != "" && strings.Contains(owner, fmt.Sprintf("-%d-", w.cmd.Process.Pid)) {
					w.cmd.Process.Signal(syscall.SIGSTOP)
					return w
				}
			}
		}
		select {
		case <-f.ctx.Done():
			f.t.Fatal("no worker had a request in flight")
		case <-time.After(time.Millisecond):
		}
	}
}

// Three workers share the crawl: every page is fetched once (again only after its lease was
// handed over or given back: checkComplete), and all exit 0 when it is over.
func TestFleetThreeWorkers(t *testing.T) {
	t.Parallel()
	f := newFleet(t, fleetWeb(), steadyLease)
	// A worker given no seeds for a shared crawl that has none: a usage error.
	if code, out := crawlOutput(t, f.ctx, "run", "--data", t.TempDir(), "--redis", f.url, "--crawl", "empty"); code != exitUsage || !strings.Contains(out, "shared crawl holds no URL") {
		t.Errorf("a worker without seeds on an empty crawl: exit %d, want %d:\n%s", code, exitUsage, out)
	}
	start := time.Now()
	ws := []*worker{f.start(""), f.start(""), f.start("")}
	f.finish(ws...)
	t.Logf("3 workers: %d pages in %v", f.expected(), time.Since(start).Round(time.Millisecond))
	f.checkComplete(0)
	f.idleInRedis()
	own := 0 // each worker's summary keeps its own pages apart from the shared crawl's
	workerSummary := regexp.MustCompile(`crawl done in \S+: this worker (\d+) fetched; the shared crawl (\d+) fetched`)
	for _, w := range ws {
		m := workerSummary.FindStringSubmatch(w.out.String())
		if m == nil {
			t.Errorf("%s: no summary of its own pages and the shared crawl's:\n%s", w.name, w.out)
			continue
		}
		n, _ := strconv.Atoi(m[1])
		own += n
		if total, _ := strconv.Atoi(m[2]); total < n || total == n {
			t.Errorf("%s: its summary says %d of its own, %d in the shared crawl", w.name, n, total)
		}
	}
	// The fleet view lists the three workers, gone now, and their pages add up to the crawl's.
	code, out := crawlOutput(t, f.ctx, "status", "--redis", f.url, "--crawl", "t", "--json")
	var view struct {
		Fetched int `json:"fetched"`
		Workers []struct {
			Pages int    `json:"pages"`
			State string `json:"state"`
			Data  string `json:"data"`
		} `json:"workers"`
	}
	if err := json.Unmarshal([]byte(out), &view); code != exitOK || err != nil {
		t.Fatalf("crawl status --redis --json: exit %d, %v:\n%s", code, err, out)
	}
	pages := 0
	for _, w := range view.Workers {
		pages += w.Pages
		if w.State != "gone" || w.Data == "" {
			t.Errorf("worker after the crawl: state %q, data %q; want gone with its --data", w.State, w.Data)
		}
	}
	if own != view.Fetched {
		t.Errorf("the workers' summaries add up to %d pages, the crawl fetched %d", own, view.Fetched)
	}
	if len(view.Workers) != 3 || pages != view.Fetched || pages == 0 {
		t.Errorf("fleet view: %d workers reporting %d pages, the crawl fetched %d; want 3 workers whose pages add up", len(view.Workers), pages, view.Fetched)
	}
	// A worker joining the finished crawl without seeds learns it is over; one with another
	// --scope mode is refused.
	late := []string{"run", "--data", t.TempDir(), "--redis", f.url, "--crawl", "t", "--partitions", "64"}
	if code, out := crawlOutput(t, f.ctx, late...); code != exitOK || !strings.Contains(out, "crawl done") {
		t.Errorf("a worker joining the finished crawl: exit %d, want 0:\n%s", code, out)
	} else if want := fmt.Sprintf("worker_fetched=0 shared_fetched=%d ", view.Fetched); !strings.Contains(out, want) {
		t.Errorf("a worker joining the finished crawl: its progress lacks %q (its own pages apart from the crawl's):\n%s", want, out)
	}
	if code, out := crawlOutput(t, f.ctx, append(late, "--scope", "domain")...); code != exitUsage || !strings.Contains(out, "--scope host") {
		t.Errorf("a worker with another --scope: exit %d, want %d naming the crawl's --scope host:\n%s", code, exitUsage, out)
	}
}

// A worker killed mid-crawl and started again on its store: nothing is lost; only the URLs it
// had in flight (reclaimed by their partitions' next owners) are fetched twice, and those of
// any partition whose lease lapsed on a loaded machine.
func TestFleetWorkerKilled(t *testing.T) {
	t.Parallel()
	f := newFleet(t, fleetWeb(), shortLease)
	ws := []*worker{f.start(""), f.start(""), f.start("")}
	f.waitServed(f.expected() / 3)
	victim := f.busiest()
	victim.cmd.Process.Signal(syscall.SIGKILL)
	f.wait(victim)
	again := f.start(victim.dir)
	for _, w := range ws {
		if w != victim {
			f.finish(w)
		}
	}
	f.finish(again)
	f.checkComplete(0)
	f.idleInRedis()
}

// redis-server killed mid-crawl and restarted on its append-only file: the workers stop,
// wait for it, and finish the crawl.
func TestFleetRedisKilled(t *testing.T) {
	t.Parallel()
	f := newFleet(t, fleetWeb(), shortLease)
	ws := []*worker{f.start(""), f.start(""), f.start("")}
	f.waitServed(f.expected() / 3)
	if err := f.srv.Kill(); err != nil {
		t.Fatal(err)
	}
	before := f.served()
	time.Sleep(2 * f.ttl)
	if during := f.served() - before; during > 3*8 {
		t.Errorf("%d pages served while Redis was down; the workers should stop fetching", during)
	}
	if err := f.srv.Restart(); err != nil {
		t.Fatal(err)
	}
	f.requeues.watch(f.srv.Addr)
	f.finish(ws...)
	noticed := 0
	for _, w := range ws {
		if strings.Contains(w.out.String(), "Redis unreachable") {
			noticed++
		}
	}
	if noticed == 0 { // a worker whose calls all waited through the outage may not notice it
		t.Errorf("no worker said Redis was lost:\n%s", ws[0].out)
	}
	// Redis' appendfsync everysec may lose the last second of writes: those pages may be
	// fetched again without being returned to a queue (queued again by a lost seen-set).
	f.checkComplete(3*8 + f.expected()/2)
	f.idleInRedis()
}

// A worker stopped (SIGSTOP) past its lease and continued: the others take its hosts over,
// its results are refused (fenced), and no host ever has two owners' requests at once.
func TestFleetWorkerStopped(t *testing.T) {
	t.Parallel()
	f := newFleet(t, fleetWeb(), shortLease)
	ws := []*worker{f.start(""), f.start(""), f.start("")}
	f.waitServed(f.expected() / 3)
	victim := f.stopFetching()
	time.Sleep(3 * f.ttl)
	victim.cmd.Process.Signal(syscall.SIGCONT)
	f.finish(ws...)
	if !strings.Contains(victim.out.String(), "ownership lost (fenced)") {
		t.Errorf("%s: no write refused by fencing after the stop:\n%s", victim.name, victim.out)
	}
	// the victim's requests in flight at the stop, and those of any partition that lapsed on
	// a loaded machine, are fetched again: each after its new owner reclaimed it
	f.checkComplete(0)
	f.idleInRedis()
}

// Workers scaled 3 → 5 → 4 mid-crawl: partitions move to the new ones and back, and the
// crawl finishes.
func TestFleetScales(t *testing.T) {
	t.Parallel()
	f := newFleet(t, fleetWeb(), shortLease)
	ws := []*worker{f.start(""), f.start(""), f.start("")}
	f.waitServed(f.expected() / 5)
	ws = append(ws, f.start(""), f.start(""))
	f.waitServed(f.expected() / 2)
	leaver := ws[1]
	leaver.cmd.Process.Signal(syscall.SIGTERM)
	if code := f.wait(leaver); code != exitInterrupted {
		t.Errorf("%s exited %d after SIGTERM, want %d:\n%s", leaver.name, code, exitInterrupted, leaver.out)
	}
	f.finish(ws[0], ws[2], ws[3], ws[4])
	// a request to a host whose partition moved is cancelled, and may have been served: it is
	// fetched again after being given back or reclaimed
	f.checkComplete(0)
	f.idleInRedis()
	// Hosts moved twice, to the workers that joined and from the one that left; each new owner
	// took the host's robots.txt from Redis: it was fetched and saved once per host. (A request
	// cut short by a move, before its owner saved it, is made again by the next owner: on a
	// loaded machine, where leases lapse, that happens any number of times.)
	_, saved := f.requeues.counts(f.ctx)
	for name, s := range f.web.Stats() {
		u, err := url.Parse(f.web.URL(name))
		if err != nil {
			t.Fatal(err)
		}
		if n := saved[u.Host]; n != 1 {
			t.Errorf("host %s: robots.txt saved to Redis %d times (requested %d times); want once, its next owners using that one", name, n, s.RobotsRequests)
		}
	}
	n, err := f.rdb.ZCard(f.ctx, "crawl:t:workers").Result()
	if err != nil || n != 0 {
		t.Errorf("%d workers still registered (err %v); each hands its partitions back at exit", n, err)
	}
}

// Redis unreachable at the start: exit 2 with the address and the cause.
func TestFleetRedisUnreachable(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code, out := crawlOutput(t, ctx, "run", "--data", t.TempDir(), "--redis", "redis://127.0.0.1:1/0", "https://example.invalid/")
	if code != exitUsage || !strings.Contains(out, "127.0.0.1:1") || strings.Count(strings.TrimSpace(out), "\n") > 0 {
		t.Errorf("exit %d, output %q; want exit %d and one line naming 127.0.0.1:1 and the cause", code, out, exitUsage)
	}
}

// A Redis older than 6.2: exit 2 with one line naming its address and version, before any
// crawling.
func TestFleetRedisTooOld(t *testing.T) {
	t.Parallel()
	addr := redistest.StartOld(t, "6.0.16")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code, out := crawlOutput(t, ctx, "run", "--data", t.TempDir(), "--redis", "redis://"+addr+"/0", "https://example.invalid/")
	want := "crawl run: redis 6.0.16 at " + addr + ": the shared crawl needs Redis 6.2 or later"
	if code != exitUsage || strings.TrimSpace(out) != want {
		t.Errorf("exit %d, output %q; want exit %d and %q", code, out, exitUsage, want)
	}
	// an operator's command is refused the same way
	code, out = crawlOutput(t, ctx, "add", "--redis", "redis://"+addr+"/0", "https://example.invalid/")
	want = "crawl add: redis 6.0.16 at " + addr + ": the shared crawl needs Redis 6.2 or later"
	if code != exitUsage || strings.TrimSpace(out) != want {
		t.Errorf("crawl add: exit %d, output %q; want exit %d and %q", code, out, exitUsage, want)
	}
}

// --host-state-ttl below a minute is refused before Redis is asked (fleet's TestHostStateExpires
// checks that the setting is the states' expiry).
func TestFleetHostStateTTLFlag(t *testing.T) {
	for _, v := range []string{"0s", "59s", "-1h"} {
		var out, errb bytes.Buffer
		code := runCmd([]string{"--data", t.TempDir(), "--redis", "redis://127.0.0.1:1/0", "--host-state-ttl", v, "https://example.invalid/"}, &out, &errb)
		if code != exitUsage || !strings.Contains(errb.String(), "--host-state-ttl") || strings.Contains(errb.String(), "127.0.0.1:1") {
			t.Errorf("--host-state-ttl %s: exit %d, %q; want exit %d naming the flag before any dial", v, code, errb.String(), exitUsage)
		}
	}
}

// --robots-ttl reaches Redis: each host's shared robots.txt expires when no worker would trust
// it any more, so an abandoned crawl's entries do not stay forever.
func TestFleetRobotsExpire(t *testing.T) {
	t.Parallel()
	f := newFleet(t, fleetWeb(), steadyLease, "--robots-ttl", "90m")
	f.finish(f.start(""))
	keys, err := f.rdb.Keys(f.ctx, "crawl:t:{*}:r:*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("robots.txt keys in Redis: %v, %v; want one per host", keys, err)
	}
	for _, k := range keys {
		if ttl, err := f.rdb.PTTL(f.ctx, k).Result(); err != nil || ttl <= 0 || ttl > 90*time.Minute {
			t.Errorf("%s expires in %v (%v), want within --robots-ttl 90m", k, ttl, err)
		}
	}
}

// Fleet-wide politeness on the politeness web (hosts with hidden limits and every reply style,
// a ban after 10 strikes): three workers together stay within 1% over-limit replies, are never
// banned, and never have more requests in flight to a host than one worker allows.
func TestFleetPoliteness(t *testing.T) {
	t.Parallel()
	f := newFleet(t, simweb.PolitenessBench(), steadyLease, "--initial-rate", "2", "--workers", "32")
	start := time.Now()
	ws := []*worker{f.start(""), f.start(""), f.start("")}
	f.finish(ws...)
	pages, over, inRA := 0, 0, 0
	for name, s := range f.web.Stats() {
		pages += len(s.Fetched)
		over += s.OverLimit
		inRA += s.InRetryAfter
		if s.Banned {
			t.Errorf("host %s banned the fleet", name)
		}
		if s.PeakInFlight > fleetHostConcurrency {
			t.Errorf("host %s: %d requests in flight at once; one worker at a time allows %d", name, s.PeakInFlight, fleetHostConcurrency)
		}
	}
	t.Logf("3 workers, politeness web: %d pages in %v, %d over-limit replies (%.2f%%), %d inside Retry-After",
		pages, time.Since(start).Round(time.Millisecond), over, 100*float64(over)/float64(pages), inRA)
	t.Logf("over-limit replies by host: %s", overLimitByHost(f.web, start))
	if over*100 > pages {
		t.Errorf("%d over-limit replies for %d pages: more than 1%%", over, pages)
	}
	f.checkComplete(0)
}

// overLimitByHost lists each host's over-limit replies with their arrival times since start,
// for a reader to tell a host's probes and limit changes from refusals spread by a slow machine.
func overLimitByHost(web *simweb.Web, start time.Time) string {
	stats := web.Stats()
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(stats)) {
		s := stats[name]
		if len(s.OverLimitAt) == 0 {
			continue
		}
		fmt.Fprintf(&b, " %s %d [", name, len(s.OverLimitAt))
		for i, at := range s.OverLimitAt {
			if i > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "+%.2fs", at.Sub(start).Seconds())
		}
		b.WriteByte(']')
	}
	return b.String()
}

// --max-host-pages holds across the fleet: two workers queue at most that many URLs of each
// host between them, and the rest are excluded as "limit".
func TestFleetHostBudget(t *testing.T) {
	t.Parallel()
	const budget = 6
	f := newFleet(t, fleetWeb(), steadyLease, "--max-host-pages", strconv.Itoa(budget))
	f.finish(f.start(""), f.start(""))
	perHost := map[string]int{}
	for u, n := range f.stored() {
		pu, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		perHost[pu.Host] += n
	}
	if len(perHost) != len(fleetWeb()) {
		t.Errorf("pages stored for %d hosts, want %d", len(perHost), len(fleetWeb()))
	}
	for h, n := range perHost {
		if n > budget {
			t.Errorf("%s: %d pages stored, budget %d", h, n, budget)
		}
	}
	limit := 0
	keys, err := f.keys(f.ctx, "crawl:t:{*}:counts")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		n, _ := f.rdb.HGet(f.ctx, k, "excluded:limit").Int()
		limit += n
	}
	if limit == 0 {
		t.Error("no URL excluded as limit")
	}
	f.idleInRedis()
}
