package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/crawl-project/crawl/internal/fleet"
	"github.com/crawl-project/crawl/internal/simweb"
	"github.com/crawl-project/crawl/internal/urlnorm"
	"github.com/redis/go-redis/v9"
)

// fleetConfig is what -scenario fleet measures.
type fleetConfig struct {
	workers  []int // worker processes of each shared crawl
	hosts    int   // unlimited hosts in the web
	pages    int   // pages per host
	links    int   // links per page (simweb.HostSpec.Links; 0: the web's own few)
	maxPages int   // each shared crawl's worker stops after this many pages (--max-pages; 0: none)
	pageKB   int   // with links: each page's size
	handover bool  // also measure handovers
	cmdStats bool  // print Redis' commands by name for each shared crawl
	leaseTTL time.Duration
	crawlBin string
	flags    []string // more flags for every `crawl run`
	timeout  time.Duration
	seed     int64
}

// fleetBench crawls a web of unlimited hosts with the crawl binary: once on its own (bbolt),
// then as shared crawls of 1, 2, 3… worker processes on one redis-server, and reports pages/s
// and CPU per page (the workers', and Redis' own). Then it measures handovers: a worker of two
// is killed (SIGKILL) or stopped (SIGTERM) mid-crawl, and the time until its hosts get a
// request from the other.
func fleetBench(w io.Writer, cfg fleetConfig) error {
	tmp, bin, err := benchDir("crawl-fleet-", cfg.crawlBin)
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	var specs []simweb.HostSpec
	for i := range cfg.hosts {
		spec := simweb.HostSpec{Name: fmt.Sprintf("free%d", i), Pages: cfg.pages,
			CrossLinks: []string{fmt.Sprintf("free%d", (i+1)%cfg.hosts)}}
		if cfg.links > 0 {
			spec.Links, spec.TextSize = cfg.links, max(cfg.pageKB*1024-pageMarkup, 1)
		}
		specs = append(specs, spec)
	}
	web, err := simweb.Start(specs, &simweb.Options{Seed: cfg.seed})
	if err != nil {
		return err
	}
	defer web.Close()
	seeds := filepath.Join(tmp, "seeds.txt")
	if err := os.WriteFile(seeds, []byte(strings.Join(web.Seeds(), "\n")+"\n"), 0o644); err != nil {
		return err
	}
	rs, err := startRedis(filepath.Join(tmp, "redis"))
	if err != nil {
		return err
	}
	defer rs.stop()
	want := 0
	for _, urls := range web.Expected() {
		want += len(urls)
	}

	fmt.Fprintf(w, "fleet: %d unlimited hosts × %d pages (%d pages, links per page %d, --max-pages %d a worker), %s, flags %q\n\n",
		cfg.hosts, cfg.pages, want, cfg.links, cfg.maxPages, rs.version, cfg.flags)
	fmt.Fprintf(w, "%-10s %7s %9s %8s %16s %16s %16s %14s %13s %15s\n", "crawl", "pages", "wall", "pages/s", "workers ms/page", "redis ms/page", "total ms/page", "redis cmd/page", "new URL/page", "redis µs/new URL")
	// newURLs is how many URLs the crawl recorded (queued, fetched, failed or excluded).
	row := func(name string, pages int, wall, cpu, redisCPU time.Duration, cmds int64, newURLs int) {
		per := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(max(pages, 1)) }
		perURL := "-"
		if newURLs > 0 {
			perURL = fmt.Sprintf("%.2f", float64(redisCPU.Microseconds())/float64(newURLs))
		}
		fmt.Fprintf(w, "%-10s %7d %9s %8.0f %16.3f %16.3f %16.3f %14.1f %13.1f %15s\n", name, pages, wall.Round(time.Millisecond),
			float64(pages)/wall.Seconds(), per(cpu), per(redisCPU), per(cpu+redisCPU), float64(cmds)/float64(max(pages, 1)),
			float64(newURLs)/float64(max(pages, 1)), perURL)
	}

	web.Reset()
	var limit []string
	if cfg.maxPages > 0 {
		limit = []string{"--max-pages", strconv.Itoa(cfg.maxPages)}
	}
	runs, wall, err := runWorkers(bin, tmp, "bbolt", 1, slices.Concat([]string{"--seeds", seeds}, limit, cfg.flags), cfg.timeout, nil)
	if err != nil {
		return err
	}
	row("bbolt", servedPages(web), wall, cpuOf(runs), 0, 0, 0)
	for _, n := range cfg.workers {
		web.Reset()
		if err := rs.rdb.FlushAll(context.Background()).Err(); err != nil {
			return err
		}
		rs.rdb.ConfigResetStat(context.Background())
		before, cmdsBefore, readsBefore := rs.cpu(), rs.commands(), rs.stat("total_reads_processed")
		args := slices.Concat([]string{"--seeds", seeds, "--redis", rs.url(), "--crawl", "bench", "--lease-ttl", cfg.leaseTTL.String()}, limit, cfg.flags)
		runs, wall, err := runWorkers(bin, tmp, fmt.Sprintf("fleet%d", n), n, args, cfg.timeout, nil)
		if err != nil {
			return err
		}
		redisCPU, cmds := rs.cpu()-before, rs.commands()-cmdsBefore
		row(fmt.Sprintf("%d worker%s", n, map[bool]string{true: "s"}[n > 1]), servedPages(web), wall, cpuOf(runs), redisCPU, cmds, recordedURLs(rs.rdb, "bench"))
		if cfg.cmdStats {
			pages := max(servedPages(web), 1)
			fmt.Fprintf(w, "  reads (requests or pipelines Redis read, INFO total_reads_processed): %.2f/page\n",
				float64(rs.stat("total_reads_processed")-readsBefore)/float64(pages))
			printCommandStats(w, rs.rdb, pages)
		}
	}
	if got := servedPages(web); got != want && cfg.maxPages == 0 {
		fmt.Fprintf(w, "warning: the last crawl fetched %d distinct pages of %d\n", got, want)
	}

	if !cfg.handover {
		return nil
	}
	fmt.Fprintf(w, "\nhandover (2 workers, --lease-ttl %s): time from the stop of one to the first request its hosts get from the other\n", cfg.leaseTTL)
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM} {
		web.Reset()
		if err := rs.rdb.FlushAll(context.Background()).Err(); err != nil {
			return err
		}
		var took time.Duration
		var hosts []string
		args := append([]string{"--seeds", seeds, "--redis", rs.url(), "--crawl", "bench", "--lease-ttl", cfg.leaseTTL.String()}, cfg.flags...)
		_, _, err := runWorkers(bin, tmp, "handover"+sig.String(), 2, args, cfg.timeout, func(procs []*worker) error {
			took, hosts, err = handover(web, rs.rdb, procs, sig, want/4)
			return err
		})
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "  %-8v %d hosts moved: first request after %s\n", sig, len(hosts), took.Round(time.Millisecond))
	}
	return nil
}

// handover waits until the web served after pages, stops the worker owning the first host's
// partition with sig, and returns how long from the signal until one of its hosts got a
// request that came after the worker exited.
func handover(web *simweb.Web, rdb *redis.Client, procs []*worker, sig syscall.Signal, after int) (time.Duration, []string, error) {
	for servedPages(web) < after {
		time.Sleep(5 * time.Millisecond)
	}
	ctx := context.Background()
	owners := map[string][]string{} // worker token → host names
	for _, name := range web.Names() {
		u, _ := url.Parse(web.URL(name))
		p := fleet.PartitionOf(urlnorm.HostKey(u), 1024)
		tok, err := rdb.Get(ctx, fmt.Sprintf("crawl:bench:{%d}:owner", p)).Result()
		if err != nil {
			continue // between owners, or done
		}
		owners[tok] = append(owners[tok], name)
	}
	for tok, hosts := range owners {
		for _, c := range procs {
			if !strings.Contains(tok, fmt.Sprintf("-%d-", c.cmd.Process.Pid)) {
				continue
			}
			if err := c.cmd.Process.Signal(sig); err != nil {
				return 0, nil, err
			}
			t0 := time.Now()
			<-c.exited // its requests all arrived before
			stats := web.Stats()
			base := map[string]int{}
			for _, h := range hosts {
				base[h] = stats[h].Requests
			}
			for time.Since(t0) < time.Minute {
				now := web.Stats()
				for _, h := range hosts {
					if now[h].Requests > base[h] {
						return time.Since(t0), hosts, nil
					}
				}
				time.Sleep(2 * time.Millisecond)
			}
			return 0, hosts, fmt.Errorf("hosts %v got no request for a minute after %v", hosts, sig)
		}
	}
	return 0, nil, fmt.Errorf("no worker owned a host of the web")
}

// recordedURLs is how many URLs crawl has recorded in Redis (queued, fetched, failed or
// excluded: each a new URL once), or 0 if it cannot be read.
func recordedURLs(rdb *redis.Client, crawl string) int {
	s, err := fleet.Open(context.Background(), rdb, crawl, "bench-reader", nil)
	if err != nil {
		return 0
	}
	c, err := s.Counts(context.Background())
	if err != nil {
		return 0
	}
	return c.Queued + c.Fetched + c.Failed + c.Excluded
}

// runWorkers runs n `crawl run` processes with args (each with its own --data under tmp) to
// their end and returns them and the wall time until the last exited. during, if not nil, runs
// once they started; a process it stopped need not exit 0.
func runWorkers(bin, tmp, name string, n int, args []string, timeout time.Duration, during func([]*worker) error) ([]*exec.Cmd, time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var procs []*exec.Cmd
	var ws []*worker
	var outs []*strings.Builder
	start := time.Now()
	for i := range n {
		dir := filepath.Join(tmp, fmt.Sprintf("%s-%d", name, i))
		c := exec.CommandContext(ctx, bin, append([]string{"run", "--data", dir, "--quiet"}, args...)...)
		out := &strings.Builder{}
		c.Stdout, c.Stderr = io.Discard, out
		c.Cancel = func() error { return c.Process.Signal(syscall.SIGQUIT) } // its stacks, to see where it waited
		c.WaitDelay = 5 * time.Second
		if err := c.Start(); err != nil {
			return nil, 0, err
		}
		w := &worker{cmd: c, exited: make(chan struct{})}
		go func() { w.err = c.Wait(); close(w.exited) }()
		procs, ws, outs = append(procs, c), append(ws, w), append(outs, out)
	}
	var duringErr error
	if during != nil {
		duringErr = during(ws)
	}
	for i, w := range ws {
		<-w.exited
		err := w.err
		if ctx.Err() != nil {
			return nil, 0, fmt.Errorf("%s worker %d: crawl killed after %s: %s", name, i, timeout, outs[i])
		}
		if err != nil && during == nil {
			return nil, 0, fmt.Errorf("%s worker %d: %v: %s", name, i, err, outs[i])
		}
	}
	return procs, time.Since(start), duringErr
}

// worker is a running `crawl run` process.
type worker struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd.Wait returned
	err    error         // what it returned
}

// cpuOf is the user + system CPU time the processes used.
func cpuOf(procs []*exec.Cmd) time.Duration {
	var d time.Duration
	for _, c := range procs {
		if ru, ok := c.ProcessState.SysUsage().(*syscall.Rusage); ok {
			d += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		}
	}
	return d
}

// servedPages is how many distinct pages the web answered 200.
func servedPages(web *simweb.Web) int {
	n := 0
	for _, s := range web.Stats() {
		n += len(s.Fetched)
	}
	return n
}

// redisServer is a redis-server the bench started on a free loopback port.
type redisServer struct {
	cmd     *exec.Cmd
	addr    string
	rdb     *redis.Client
	version string
}

func startRedis(dir string) (*redisServer, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "",
		"--appendonly", "yes", "--appendfsync", "everysec", "--dir", dir, "--maxmemory-policy", "noeviction")
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start redis-server: %w", err)
	}
	rs := &redisServer{cmd: cmd, addr: fmt.Sprintf("127.0.0.1:%d", port)}
	rs.rdb = redis.NewClient(&redis.Options{Addr: rs.addr})
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		info, err := rs.rdb.Info(context.Background(), "server").Result()
		if err == nil {
			for _, line := range strings.Split(info, "\n") {
				if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
					rs.version = "redis-server " + v
				}
			}
			return rs, nil
		}
		if time.Now().After(end) {
			rs.stop()
			return nil, fmt.Errorf("redis-server on %s: %w", rs.addr, err)
		}
	}
}

func (rs *redisServer) url() string { return "redis://" + rs.addr + "/0" }

// cpu is the server's user + system CPU time so far, from /proc (clock ticks of 10 ms).
func (rs *redisServer) cpu() time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", rs.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// printCommandStats prints INFO commandstats per page, the most frequent first.
func printCommandStats(w io.Writer, rdb *redis.Client, pages int) {
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		fmt.Fprintf(w, "  commandstats: %v\n", err)
		return
	}
	type stat struct {
		name  string
		calls int64
		usec  int64
	}
	var stats []stat
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(line), "cmdstat_"), ":")
		if !ok || !strings.HasPrefix(rest, "calls=") {
			continue
		}
		var st stat
		st.name = name
		for _, kv := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "calls":
				st.calls, _ = strconv.ParseInt(v, 10, 64)
			case "usec":
				st.usec, _ = strconv.ParseInt(v, 10, 64)
			}
		}
		stats = append(stats, st)
	}
	slices.SortFunc(stats, func(a, b stat) int { return int(b.calls - a.calls) })
	for _, st := range stats {
		fmt.Fprintf(w, "  %-18s %8.2f calls/page %8.4f ms/page\n", st.name, float64(st.calls)/float64(max(pages, 1)), float64(st.usec)/1000/float64(max(pages, 1)))
	}
}

// commands is how many commands the server has processed so far (INFO stats'
// total_commands_processed: those a script calls count too); -1 if it cannot be read.
func (rs *redisServer) commands() int64 { return rs.stat("total_commands_processed") }

// stat is the counter name of the server's INFO stats, or -1.
func (rs *redisServer) stat(name string) int64 {
	info, err := rs.rdb.Info(context.Background(), "stats").Result()
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return -1
}

func (rs *redisServer) stop() {
	rs.rdb.Close()
	rs.cmd.Process.Signal(syscall.SIGTERM)
	rs.cmd.Wait()
}
