package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/crawl-project/crawl/internal/dnstest"
	"github.com/crawl-project/crawl/internal/render"
	"github.com/crawl-project/crawl/internal/simweb"
)

// renderConfig is what -scenario render crawls.
type renderConfig struct {
	pages    int     // pages of the App web
	apiLimit float64 // the API host's hidden limit, req/s
	cdnLimit float64 // the CDN host's, req/s
	stated   bool    // the API states its limit in rate-limit headers
	tabs     int     // --render-tabs (0: the default)
	rounds   int     // crawls of each kind, alternated
}

// renderCosts crawls an App web (simweb: shells whose content and links come from a limited API
// host, files from a limited CDN host) with --render always, and the same site rendered on the
// server with --render never, alternately (cfg.rounds of each), running the crawl binary as a
// process of its own, and prints for each crawl: pages, time, time against the ideal (pages ÷
// the API's limit; rendered crawls only), pages/s, the share of requests refused, and CPU and
// peak memory of the crawl and every process it started (the browser's included; its
// proportional share, Pss), and per tab; and, for rendered crawls, the machine's render
// capacity (its cores ÷ the CPU time of a page: the pages/s the crawl could render if the
// cores were its own) and pages/s against the bound, the lower of that capacity and the
// API's limit. "cores" is the CPU the crawl's processes got (CPU time ÷ wall time): on a
// machine shared with other work, the capacity it could use is that many cores' worth.
func renderCosts(w io.Writer, bin string, cfg renderConfig, crawlFlags []string, timeout time.Duration) error {
	tmp, bin, err := benchDir("crawl-render-", bin)
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	fmt.Fprintf(w, "render: App web of %d pages, API %g req/s (%s), CDN %g req/s; ideal %.1f s (pages ÷ the API's limit)\n",
		cfg.pages, cfg.apiLimit, map[bool]string{true: "stated in headers", false: "hidden"}[cfg.stated], cfg.cdnLimit, float64(cfg.pages)/cfg.apiLimit)
	fmt.Fprintf(w, "cores %d, load average %s\n", runtime.NumCPU(), loadAverage())
	fmt.Fprintf(w, "%-10s %6s %8s %7s %8s %9s %10s %12s %9s %7s %6s %9s %8s\n", "kind", "pages", "time s", "ideal", "pages/s", "refused", "CPU ms/p", "crawl ms/p", "peak MB", "MB/tab", "cores", "capacity", "of bound")
	for round := range cfg.rounds {
		for _, rendered := range []bool{true, false} {
			line, err := renderRun(tmp, bin, cfg, rendered, round, crawlFlags, timeout)
			if err != nil {
				return err
			}
			fmt.Fprintln(w, line)
		}
	}
	return nil
}

// renderRun runs one crawl of renderCosts and returns its line.
func renderRun(tmp, bin string, cfg renderConfig, rendered bool, round int, crawlFlags []string, timeout time.Duration) (string, error) {
	o := simweb.AppOptions{Pages: cfg.pages, APILimit: cfg.apiLimit, CDNLimit: cfg.cdnLimit, Prerendered: !rendered}
	if cfg.stated {
		o.APIHeaders = simweb.HeadersIETF
	}
	app := simweb.NewApp(o)
	web, err := simweb.Start(app.Specs, &simweb.Options{VirtualHosts: true})
	if err != nil {
		return "", err
	}
	defer web.Close()
	dns, err := dnstest.Start(&dnstest.Options{Resolve: func(name string) []netip.Addr {
		switch name {
		case simweb.AppSite, simweb.AppAPI, simweb.AppCDN:
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}
		}
		return nil
	}})
	if err != nil {
		return "", err
	}
	defer dns.Close()
	_, port, _ := net.SplitHostPort(web.Addr())
	kind, mode := "server", "never"
	if rendered {
		kind, mode = "rendered", "always"
	}
	dir := filepath.Join(tmp, fmt.Sprintf("%s-%d", kind, round))
	args := []string{"run", "--data", dir, "--quiet", "--dns-server", dns.Addr(), "--render", mode,
		"http://" + simweb.AppSite + ":" + port + simweb.AppPagePath(0)}
	if cfg.tabs > 0 {
		args = append(args, "--render-tabs", strconv.Itoa(cfg.tabs))
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append(args, crawlFlags...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return "", err
	}
	tree := newTreeSampler(cmd.Process.Pid)
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			tree.sample()
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	err = cmd.Wait()
	wall := time.Since(start)
	close(stop)
	<-sampled
	if err != nil {
		return "", fmt.Errorf("%s crawl: %v\n%s", kind, err, stderr.String())
	}
	pages, requests, refused := 0, 0, 0
	for name, s := range web.Stats() {
		requests += s.Requests
		refused += s.OverLimit
		if name == simweb.AppSite {
			pages = s.OK - s.RobotsRequests
		}
	}
	cpu, own := tree.cpu(), time.Duration(tree.ticks[cmd.Process.Pid])*time.Second/clockTicks
	perTab := "-"
	if rendered {
		tabs := cfg.tabs
		if tabs == 0 {
			tabs = render.DefaultTabs()
		}
		perTab = fmt.Sprintf("%.0f", tree.peakMB/float64(tabs))
	}
	ideal, capacity, ofBound := "-", "-", "-"
	rate := float64(pages) / wall.Seconds()
	if rendered {
		ideal = fmt.Sprintf("%.2f", float64(cfg.pages)/cfg.apiLimit/wall.Seconds())
		if perPage := cpu.Seconds() / float64(max(pages, 1)); perPage > 0 {
			c := float64(runtime.NumCPU()) / perPage
			capacity = fmt.Sprintf("%.1f", c)
			ofBound = fmt.Sprintf("%.2f", rate/min(c, cfg.apiLimit))
		}
	}
	return fmt.Sprintf("%-10s %6d %8.1f %7s %8.2f %8.2f%% %10.0f %12.0f %9.0f %7s %6.2f %9s %8s", kind, pages, wall.Seconds(), ideal,
		rate, 100*float64(refused)/float64(max(requests, 1)),
		1000*cpu.Seconds()/float64(max(pages, 1)), 1000*own.Seconds()/float64(max(pages, 1)), tree.peakMB, perTab,
		cpu.Seconds()/wall.Seconds(), capacity, ofBound), nil
}

// loadAverage returns the machine's load averages over 1, 5 and 15 minutes, or "?".
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "?"
}

// treeSampler follows a process and its descendants through /proc: the CPU time each used
// (the last reading of each, summed) and the peak of their summed resident memory.
type treeSampler struct {
	root   int
	ticks  map[int]int64 // pid -> utime+stime, clock ticks, last read
	peakMB float64
}

func newTreeSampler(root int) *treeSampler { return &treeSampler{root: root, ticks: map[int]int64{}} }

// clockTicks is the kernel's USER_HZ, 100 on every Linux this runs on.
const clockTicks = 100

func (t *treeSampler) sample() {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	parent := map[int]int{}
	stats := map[int][]string{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid …: comm may hold spaces; fields after the last ')'.
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 22 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		parent[pid], stats[pid] = ppid, f
	}
	rssKB := int64(0)
	for pid, f := range stats {
		if !t.descends(pid, parent) {
			continue
		}
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		t.ticks[pid] = ut + st
		rssKB += residentKB(pid)
	}
	if mb := float64(rssKB) / 1024; mb > t.peakMB {
		t.peakMB = mb
	}
}

// descends reports whether pid is the root or one of its descendants.
func (t *treeSampler) descends(pid int, parent map[int]int) bool {
	for range 64 {
		if pid == t.root {
			return true
		}
		p, ok := parent[pid]
		if !ok || p <= 1 {
			return false
		}
		pid = p
	}
	return false
}

func (t *treeSampler) cpu() time.Duration {
	var sum int64
	for _, v := range t.ticks {
		sum += v
	}
	return time.Duration(sum) * time.Second / clockTicks
}

// residentKB reads a process's proportional resident memory, kB: its Pss, which shares the
// pages several processes map among them (a browser's processes share most of theirs), or
// its VmRSS where smaps_rollup is not readable; 0 if it is gone.
func residentKB(pid int) int64 {
	if kb, ok := procField(fmt.Sprintf("/proc/%d/smaps_rollup", pid), "Pss:"); ok {
		return kb
	}
	kb, _ := procField(fmt.Sprintf("/proc/%d/status", pid), "VmRSS:")
	return kb
}

// procField reads the kB figure of the line starting with name in a /proc file.
func procField(path, name string) (int64, bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), name); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb, err == nil
		}
	}
	return 0, false
}
