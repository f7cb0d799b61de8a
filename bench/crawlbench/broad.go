package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/crawl-project/crawl/internal/dnstest"
	"github.com/crawl-project/crawl/internal/simweb"
)

// broadConfig is what -scenario broad crawls.
type broadConfig struct {
	hosts, pages int     // the broad web: hosts × pages per host
	limit        float64 // each host's hidden token bucket, req/s (0: unlimited)
	seedHosts    int     // hosts in the seed file, spread evenly (0: all)
	dnsDelay     time.Duration
	thrPages     int      // pages per host of the two-host throughput crawl
	pageKB       int      // about how big the throughput crawl's pages are, in KB (0: simweb's 1–4 KB of text)
	crawlBin     string   // the crawl binary ("": built from ./cmd/crawl)
	crawlFlags   []string // added to both crawls' command lines
	thrFlags     []string // added to the throughput crawl's command line only
	grace        time.Duration
	seed         int64
	timeout      time.Duration // each crawl is killed after this
	// hub > 0 seeds the broad crawl with one page linking every host of the broad web
	// (hub.broad.test's root) beside hub other hosts of otherPages pages each, unlimited, on a
	// web of their own, instead of the seeds and the two-host throughput crawl: the longest
	// gap between the other hosts' requests once the hub page is fetched is what its links
	// cost the rest of the crawl.
	hub, otherPages int
	keep            bool // keep the crawls' directories (their stores) instead of removing them
}

// childRun is what one `crawl run` process cost, as the kernel counted it.
type childRun struct {
	wall   time.Duration
	cpu    time.Duration // user + system
	sys    time.Duration // system alone
	peakMB float64       // peak RSS (ru_maxrss)
	exit   int
	stderr []string // the last lines of its stderr
	idle   idleCount
}

// broad runs the crawl binary, as a user would, on two webs: first two unlimited hosts (its
// throughput, pages/s) and then a broad web of many rate-limited hosts served by one loopback
// listener whose names a loopback DNS server resolves. It prints what the servers counted and
// what the crawl process cost, and the wall time against pages ÷ throughput.
func broad(w io.Writer, cfg broadConfig) error {
	tmp, bin, err := benchDir("crawl-broad-", cfg.crawlBin)
	if err != nil {
		return err
	}
	if cfg.keep {
		fmt.Fprintf(w, "keeping the crawls' directories in %s\n", tmp)
	} else {
		defer os.RemoveAll(tmp)
	}
	if cfg.hub > 0 {
		return broadHub(w, cfg, tmp, bin)
	}

	// Two unlimited hosts: the crawler's own pages/s on loopback.
	text := 0
	if cfg.pageKB > 0 {
		text = max(cfg.pageKB*1024-pageMarkup, 1)
	}
	thrSpecs := []simweb.HostSpec{{Name: "free1", Pages: cfg.thrPages, TextSize: text}, {Name: "free2", Pages: cfg.thrPages, TextSize: text}}
	thrWeb, err := simweb.Start(thrSpecs, &simweb.Options{Seed: cfg.seed})
	if err != nil {
		return err
	}
	pageBytes, _, err := meanPage(thrWeb)
	if err != nil {
		thrWeb.Close()
		return err
	}
	thrRun, err := runCrawl(bin, filepath.Join(tmp, "thr"), thrWeb.Seeds(), slices.Concat(cfg.crawlFlags, cfg.thrFlags), cfg.timeout, false)
	thrWeb.Close()
	if err != nil {
		return err
	}
	thr := tally(thrWeb)
	thrRate := float64(thr.pages) / thrRun.wall.Seconds()
	fmt.Fprintf(w, "throughput: 2 unlimited hosts × %d pages of %.1f KB: %d pages in %s = %.0f pages/s; CPU %.2f s = %.3f ms/page (system %.2f s); peak RSS %.1f MB%s\n",
		cfg.thrPages, pageBytes/1024, thr.pages, thrRun.wall.Round(time.Millisecond), thrRate, thrRun.cpu.Seconds(),
		1000*thrRun.cpu.Seconds()/float64(max(thr.pages, 1)), thrRun.sys.Seconds(), thrRun.peakMB, exitNote(thrRun))

	// The broad web.
	start := time.Now()
	specs := simweb.Broad(cfg.hosts, cfg.pages, cfg.limit, cfg.seed)
	web, err := simweb.Start(specs, &simweb.Options{Seed: cfg.seed, Grace: cfg.grace, VirtualHosts: true})
	if err != nil {
		return err
	}
	defer web.Close()
	names := make(map[string]bool, len(specs))
	for _, s := range specs {
		names[s.Name] = true
	}
	loopback := []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	dns, err := dnstest.Start(&dnstest.Options{
		Resolve: func(name string) []netip.Addr {
			if names[name] {
				return loopback
			}
			return nil
		},
		Delay: func(string) time.Duration { return cfg.dnsDelay },
	})
	if err != nil {
		return err
	}
	defer dns.Close()
	seeds := web.Seeds()
	if n := cfg.seedHosts; n > 0 && n < len(seeds) {
		picked := make([]string, n)
		for i := range picked {
			picked[i] = seeds[i*len(seeds)/n]
		}
		seeds = picked
	}
	fmt.Fprintf(w, "\nbroad: %d hosts × %d pages, %g req/s each (burst 1, 429 + Retry-After), %d seeds, scope domain, DNS on loopback (TTL %s, delay %s); web ready in %s\n",
		cfg.hosts, cfg.pages, cfg.limit, len(seeds), dnstest.DefaultTTL, cfg.dnsDelay, time.Since(start).Round(time.Millisecond))
	flags := append([]string{"--scope", "domain", "--dns-server", dns.Addr(), "--metrics-addr", "127.0.0.1:0", "--log-format", "json"}, cfg.crawlFlags...)
	run, err := runCrawl(bin, filepath.Join(tmp, "broad"), seeds, flags, cfg.timeout, true)
	if err != nil {
		return err
	}
	t := tally(web)
	ideal := float64(t.pages) / thrRate
	fmt.Fprintf(w, "  pages          %d of %d (complete %.4f)%s\n", t.pages, t.expected, frac(t.pages, t.expected), exitNote(run))
	fmt.Fprintf(w, "  requests       %d (robots.txt %d)\n", t.requests, t.robots)
	fmt.Fprintf(w, "  429s           %d = %.2f%% of requests refused (target ≤ 1%%); hosts refused at least once: %d of %d\n",
		t.over, 100*frac(t.over, t.requests), t.hostsRefused, cfg.hosts)
	fmt.Fprintf(w, "  in Retry-After %d requests (simweb grace %s)\n", t.inRA, cfg.grace)
	fmt.Fprintf(w, "  wall           %s; pages ÷ throughput = %.1f s; ratio %.2f (target ≤ 1.2); a host's own floor (pages ÷ limit) %s\n",
		run.wall.Round(100*time.Millisecond), ideal, run.wall.Seconds()/ideal, hostFloor(cfg))
	idle, unpaused := idleSeconds(web, &run.idle)
	fmt.Fprintf(w, "  idle           %d s in which no request reached any host (%d of them with URLs queued and no host paused, by the crawl's metrics)\n",
		idle, unpaused)
	printCosts(w, run, t, filepath.Join(tmp, "broad"), cfg.hosts, dns.Total())
	fmt.Fprintf(w, "  requests/s     by 5 s at the servers: %s\n", timeline(web))
	return nil
}

// printCosts prints what a broad crawl of hosts hosts cost: peak RSS, its store's size, CPU
// and DNS queries.
func printCosts(w io.Writer, run childRun, t webTally, dir string, hosts, dnsQueries int) {
	fmt.Fprintf(w, "  peak RSS       %.1f MB (%.1f KB per host)\n", run.peakMB, 1024*run.peakMB/float64(hosts))
	if fi, err := os.Stat(filepath.Join(dir, "data", "crawl.db")); err == nil {
		fmt.Fprintf(w, "  store          %.1f MB (%.0f B per page)\n", float64(fi.Size())/(1<<20), float64(fi.Size())/float64(max(t.pages, 1)))
	}
	fmt.Fprintf(w, "  CPU            %.2f s = %.3f ms/page\n", run.cpu.Seconds(), 1000*run.cpu.Seconds()/float64(max(t.pages, 1)))
	fmt.Fprintf(w, "  DNS queries    %d (%.2f per host name; A and AAAA count one each)\n", dnsQueries, float64(dnsQueries)/float64(hosts))
}

// hubService is how long the hub host takes to answer each of its two requests.
const hubService = 5 * time.Second

// hubName is the host of broadHub's page that links every host of the broad web.
const hubName = "hub." + simweb.BroadDomain

// broadHub crawls, from two kinds of seed at once, the root of hubName, one page linking every
// host of a broad web of cfg.hosts hosts, and cfg.hub unlimited hosts of cfg.otherPages pages
// on a web of their own. It prints the longest gap between consecutive requests to those
// other hosts from the hub page's fetch to their last request, and what the crawl cost.
func broadHub(w io.Writer, cfg broadConfig, tmp, bin string) error {
	specs := simweb.Broad(cfg.hosts, cfg.pages, cfg.limit, cfg.seed)
	// The hub answers each request hubService late, so that the other hosts are crawled at
	// their full rate when its links come.
	hub := simweb.HostSpec{Name: hubName, Pages: 1, Service: hubService}
	names := make(map[string]bool, len(specs)+1)
	for _, s := range specs {
		names[s.Name] = true
		hub.CrossLinks = append(hub.CrossLinks, s.Name)
	}
	names[hubName] = true
	specs = append(specs, hub)
	web, err := simweb.Start(specs, &simweb.Options{Seed: cfg.seed, Grace: cfg.grace, VirtualHosts: true})
	if err != nil {
		return err
	}
	defer web.Close()
	var arrivals struct {
		sync.Mutex
		at []time.Time
	}
	otherSpecs := make([]simweb.HostSpec, cfg.hub)
	for i := range otherSpecs {
		otherSpecs[i] = simweb.HostSpec{Name: fmt.Sprintf("other%d", i), Pages: cfg.otherPages}
	}
	others, err := simweb.Start(otherSpecs, &simweb.Options{Seed: cfg.seed, Clock: func() time.Time {
		now := time.Now()
		arrivals.Lock()
		arrivals.at = append(arrivals.at, now)
		arrivals.Unlock()
		return now
	}})
	if err != nil {
		return err
	}
	defer others.Close()
	loopback := []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	dns, err := dnstest.Start(&dnstest.Options{Resolve: func(name string) []netip.Addr {
		if names[name] {
			return loopback
		}
		return nil
	}})
	if err != nil {
		return err
	}
	defer dns.Close()
	seeds := append([]string{web.URL(hubName)}, others.Seeds()...)
	fmt.Fprintf(w, "broad hub: one page linking %d hosts × %d pages (%g req/s each), beside %d unlimited hosts × %d pages, scope domain, DNS on loopback\n",
		cfg.hosts, cfg.pages, cfg.limit, cfg.hub, cfg.otherPages)
	flags := append([]string{"--scope", "domain", "--dns-server", dns.Addr(), "--metrics-addr", "127.0.0.1:0", "--log-format", "json"}, cfg.crawlFlags...)
	run, err := runCrawl(bin, filepath.Join(tmp, "broad"), seeds, flags, cfg.timeout, true)
	if err != nil {
		return err
	}
	t, o := tally(web), tally(others)
	fmt.Fprintf(w, "  pages          broad %d of %d, others %d of %d%s\n", t.pages, t.expected, o.pages, o.expected, exitNote(run))
	fmt.Fprintf(w, "  wall           %s\n", run.wall.Round(100*time.Millisecond))
	stats := web.Stats()
	hubAt := stats[hubName].LastRequest.Add(hubService) // its robots.txt, then its page, answered hubService after
	var firstNew time.Time
	for name, st := range stats {
		if name != hubName && !st.FirstRequest.IsZero() && (firstNew.IsZero() || st.FirstRequest.Before(firstNew)) {
			firstNew = st.FirstRequest
		}
	}
	fmt.Fprintf(w, "  hub page       answered at %s of the crawl; the first request to a host it links %s after\n",
		hubAt.Sub(stats[hubName].FirstRequest).Round(time.Millisecond), firstNew.Sub(hubAt).Round(time.Millisecond))
	arrivals.Lock()
	at := slices.Clone(arrivals.at)
	arrivals.Unlock()
	slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
	var gap time.Duration
	var gapAt time.Time
	for i := 1; i < len(at); i++ {
		if at[i].Before(hubAt) {
			continue
		}
		from := at[i-1]
		if from.Before(hubAt) {
			from = hubAt
		}
		if d := at[i].Sub(from); d > gap {
			gap, gapAt = d, from
		}
	}
	after := 0
	for _, a := range at {
		if !a.Before(hubAt) {
			after++
		}
	}
	fmt.Fprintf(w, "  stall          longest gap between the other hosts' requests after the hub page was answered: %s (from %s after it); %d of their %d requests came after it\n",
		gap.Round(time.Millisecond), gapAt.Sub(hubAt).Round(time.Millisecond), after, len(at))
	before, after30 := 0, 0
	perSec := make([]int, 30)
	for _, a := range at {
		switch d := a.Sub(hubAt); {
		case d >= -5*time.Second && d < 0:
			before++
		case d >= 0 && d < 30*time.Second:
			after30++
			perSec[int(d/time.Second)]++
		}
	}
	fmt.Fprintf(w, "  others' rate   %.0f requests/s in the 5 s before the hub page was answered, %.0f in the 30 s after (%.2f of it)\n",
		float64(before)/5, float64(after30)/30, float64(after30)/30/max(float64(before)/5, 1))
	fmt.Fprintf(w, "  others/s       in each second of those 30: %v\n", perSec)
	t.pages += o.pages
	printCosts(w, run, t, filepath.Join(tmp, "broad"), cfg.hosts, dns.Total())
	fmt.Fprintf(w, "  requests/s     by 5 s at the broad web: %s\n", timeline(web))
	return nil
}

// pageMarkup is about how many bytes of an ordinary simweb page are not its text: the head,
// the paragraphs' tags and some eight links.
const pageMarkup = 700

// meanPage returns the mean size and the mean number of links of up to 100 pages of web's
// first host, fetched once each, and then resets web's counters.
func meanPage(web *simweb.Web) (size, links float64, err error) {
	defer web.Reset()
	defer http.DefaultClient.CloseIdleConnections()
	urls := web.Expected()[web.Names()[0]]
	urls = urls[:min(len(urls), 100)]
	var total, hrefs int
	for _, u := range urls {
		resp, err := http.Get(u)
		if err != nil {
			return 0, 0, err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return 0, 0, err
		}
		total += len(b)
		hrefs += bytes.Count(b, []byte("<a href="))
	}
	n := float64(max(len(urls), 1))
	return float64(total) / n, float64(hrefs) / n, nil
}

// hostFloor is the least time one host's pages take at its limit (robots.txt's request included).
func hostFloor(cfg broadConfig) string {
	if cfg.limit <= 0 {
		return "-"
	}
	return (time.Duration(float64(cfg.pages) / cfg.limit * float64(time.Second))).String()
}

func exitNote(r childRun) string {
	if r.exit == 0 {
		return ""
	}
	return fmt.Sprintf(" [crawl exited %d: %s]", r.exit, strings.Join(r.stderr, " | "))
}

// webTally is what the simulated servers counted, summed over hosts.
type webTally struct {
	pages, expected, requests, robots, over, inRA, hostsRefused int
}

func tally(web *simweb.Web) webTally {
	var t webTally
	stats, expected := web.Stats(), web.Expected()
	for name, st := range stats {
		for _, u := range expected[name] {
			if st.Fetched[u] > 0 {
				t.pages++
			}
		}
		t.expected += len(expected[name])
		t.requests += st.Requests
		t.robots += st.RobotsRequests
		t.over += st.OverLimit
		t.inRA += st.InRetryAfter
		if st.OverLimit > 0 {
			t.hostsRefused++
		}
	}
	return t
}

// runCrawl runs `crawl run` on seeds in dir with flags and waits for it. With watch set, its
// flags must serve metrics at 127.0.0.1:0 with JSON logs: runCrawl reads the metrics' address
// from the log and samples them while the crawl runs.
func runCrawl(bin, dir string, seeds, flags []string, timeout time.Duration, watch bool) (childRun, error) {
	var r childRun
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return r, err
	}
	seedFile := filepath.Join(dir, "seeds.txt")
	if err := os.WriteFile(seedFile, []byte(strings.Join(seeds, "\n")+"\n"), 0o644); err != nil {
		return r, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	args := append([]string{"run", "--seeds", seedFile, "--data", filepath.Join(dir, "data"), "--quiet"}, flags...)
	cmd := exec.CommandContext(ctx, bin, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return r, err
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return r, err
	}
	metricsURL := make(chan string, 1)
	var tail []string
	var wg sync.WaitGroup
	wg.Go(func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var rec struct{ Msg, URL string }
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Msg == "serving metrics" {
				select {
				case metricsURL <- rec.URL:
				default:
				}
			}
			tail = append(tail, sc.Text())
			if len(tail) > 5 {
				tail = tail[1:]
			}
		}
	})
	stop := make(chan struct{})
	var hwm atomic.Int64 // the child's own peak RSS, kB: ru_maxrss also counts this process's RSS at the fork
	wg.Go(func() { watchHWM(cmd.Process.Pid, &hwm, stop) })
	var idle idleCount
	if watch {
		wg.Go(func() { idle.sample(metricsURL, stop) })
	}
	err = cmd.Wait()
	r.wall = time.Since(start)
	close(stop)
	wg.Wait()
	r.idle, r.stderr = idle, tail
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		r.sys = time.Duration(ru.Stime.Nano())
		r.peakMB = float64(ru.Maxrss) / 1024 // kilobytes on Linux
	}
	if kb := hwm.Load(); kb > 0 {
		r.peakMB = float64(kb) / 1024
	}
	r.exit = cmd.ProcessState.ExitCode()
	if ctx.Err() != nil {
		return r, fmt.Errorf("crawl killed after %s", timeout)
	}
	if _, exited := err.(*exec.ExitError); err != nil && !exited {
		return r, err
	}
	return r, nil
}

// watchHWM keeps in hwm the peak resident set (VmHWM, kB) of process pid, read from /proc every
// 50 ms until stop is closed. Linux's ru_maxrss of a child is at least its parent's RSS when it
// forked, so it cannot measure a small crawl started by this large process.
func watchHWM(pid int, hwm *atomic.Int64, stop <-chan struct{}) {
	path := fmt.Sprintf("/proc/%d/status", pid)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if b, err := os.ReadFile(path); err == nil {
			for line := range strings.Lines(string(b)) {
				if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
					var kb int64
					if _, err := fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), &kb); err == nil && kb > hwm.Load() {
						hwm.Store(kb)
					}
				}
			}
		}
		select {
		case <-stop:
			return
		case <-tick.C:
		}
	}
}

// sampleEvery is how often the crawl's metrics are read: as often as the crawl updates its
// gauges (each scrape sorts every host the crawl knows, in the crawl's process).
const sampleEvery = time.Second

// idleCount is what the crawl's metrics said over time: when URLs were queued and how many
// hosts were paused by a Retry-After.
type idleCount struct {
	samples []idleSample
}

type idleSample struct {
	at             time.Time
	queued, paused float64
}

// sample reads the metrics at the URL it is sent every sampleEvery until stop is closed.
func (c *idleCount) sample(metricsURL <-chan string, stop <-chan struct{}) {
	var url string
	select {
	case url = <-metricsURL:
	case <-stop:
		return
	}
	client := &http.Client{Timeout: time.Second}
	defer client.CloseIdleConnections()
	tick := time.NewTicker(sampleEvery)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		g, err := gauges(client, url)
		if err != nil || len(g) == 0 {
			continue // not yet ticked, or gone
		}
		c.samples = append(c.samples, idleSample{time.Now(), g[`crawl_frontier_urls{state="queued"}`], g["crawl_hosts_paused"]})
	}
}

// near returns the sample taken nearest to t, if any was taken within 2 s of it.
func (c *idleCount) near(t time.Time) (idleSample, bool) {
	var best idleSample
	found := false
	for _, s := range c.samples {
		if d := s.at.Sub(t).Abs(); d <= 2*time.Second && (!found || d < best.at.Sub(t).Abs()) {
			best, found = s, true
		}
	}
	return best, found
}

// idleSeconds counts the whole seconds, from the first request that reached the web to the
// last, in which no request reached any host; unpaused counts those in which the crawl's
// metrics (the sample nearest the middle of the second) showed URLs queued and no host paused.
func idleSeconds(web *simweb.Web, c *idleCount) (idle, unpaused int) {
	first, per := web.Arrivals()
	for i, n := range per {
		if n != 0 {
			continue
		}
		idle++
		if s, ok := c.near(first.Add(time.Duration(i)*time.Second + time.Second/2)); ok && s.queued > 0 && s.paused == 0 {
			unpaused++
		}
	}
	return idle, unpaused
}

// timeline returns the requests/s that reached the web in each 5-s stretch of the crawl.
func timeline(web *simweb.Web) string {
	_, per := web.Arrivals()
	var b strings.Builder
	for i := 0; i < len(per); i += 5 {
		sum := 0
		for _, n := range per[i:min(i+5, len(per))] {
			sum += n
		}
		fmt.Fprintf(&b, " %d", sum/min(5, len(per)-i))
	}
	return strings.TrimSpace(b.String())
}

// gauges scrapes the gauges the idle count needs.
func gauges(c *http.Client, url string) (map[string]float64, error) {
	resp, err := c.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "crawl_frontier_urls{") && !strings.HasPrefix(line, "crawl_hosts_paused ") {
			continue
		}
		name, val, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		if v, err := strconv.ParseFloat(val, 64); err == nil {
			out[name] = v
		}
	}
	return out, sc.Err()
}
