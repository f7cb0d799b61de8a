// Command nginxbench crawls static sites served by a real nginx, each behind one of nginx's own
// limiters (limit_req with and without burst, nodelay or delaying, 503 or 429; limit_conn), and
// prints what nginx's access logs recorded: pages fetched, refusals, makespan against the ideal
// at the configured limit, and latency. The simulated web (internal/bench) is written by us and
// so shares our assumptions; nginx's limit_req is the limiter most real sites put in front of a
// crawler, with its own arithmetic (a leaky bucket counted in milliseconds, no Retry-After).
//
// nginx is not a dependency of the project: the command looks for it on PATH (or -nginx) and
// says how to install it if it is missing (Debian: apt-get install nginx-light). Every server
// listens on 127.0.0.1 only.
//
//	go run ./internal/nginxbench
//	go run ./internal/nginxbench -only req10,req10-b5 -scale 2
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/crawl-project/crawl/internal/crawler"
)

// site is one nginx server and the limiter in front of it.
type site struct {
	name    string
	pages   int
	rate    int  // limit_req rate, r/s; 0: no limit_req
	burst   int  // limit_req burst
	nodelay bool // limit_req nodelay: the burst passes at once instead of being spaced out
	status  int  // limit_req_status / limit_conn_status; 0: nginx's default 503
	// conn is limit_conn per server (0: none): more requests in flight at once are refused.
	// Static pages leave nginx within a millisecond (the socket buffer takes them whole, even
	// under limit_rate), so this site checks that concurrency refusals are handled; it has no
	// capacity to compare a makespan with.
	conn int

	port int
}

func (s site) style() string {
	var parts []string
	if s.rate > 0 {
		p := fmt.Sprintf("limit_req %dr/s", s.rate)
		if s.burst > 0 {
			p += fmt.Sprintf(" burst=%d", s.burst)
			if s.nodelay {
				p += " nodelay"
			}
		}
		parts = append(parts, p)
	}
	if s.conn > 0 {
		parts = append(parts, fmt.Sprintf("limit_conn %d", s.conn))
	}
	if len(parts) == 0 {
		return "none"
	}
	st := s.status
	if st == 0 {
		st = 503
	}
	return strings.Join(parts, ", ") + fmt.Sprintf(" (%d)", st)
}

// ideal is the makespan of a client that knew the limit: every page at the rate (the burst
// saves burst/rate); 0 where no rate limits the site.
func (s site) ideal() time.Duration {
	if s.rate > 0 {
		return time.Duration(float64(max(s.pages-s.burst, 0)) / float64(s.rate) * float64(time.Second))
	}
	return 0
}

func sites(scale int) []site {
	all := []site{
		{name: "req10", pages: 150, rate: 10},
		{name: "req5-429", pages: 100, rate: 5, status: 429},
		{name: "req10-b5", pages: 150, rate: 10, burst: 5, nodelay: true, status: 429},
		{name: "req20-b10-delay", pages: 300, rate: 20, burst: 10},
		{name: "req40-b20", pages: 600, rate: 40, burst: 20, nodelay: true},
		{name: "conn2", pages: 300, conn: 2},
		{name: "free", pages: 300},
	}
	for i := range all {
		all[i].pages *= max(scale, 1)
	}
	return all
}

func main() {
	nginx := flag.String("nginx", "", "path to the nginx binary (default: nginx on PATH, then /usr/sbin/nginx)")
	only := flag.String("only", "", "comma-separated site names to crawl (default: all)")
	scale := flag.Int("scale", 1, "multiply every site's page count by this")
	keep := flag.Bool("keep", false, "keep the working directory (nginx config, logs, crawl store) and print it")
	flag.DurationVar(&traceEvery, "trace", 0, "print each host's controller state (rate, window, accepted rate, in flight, p95) this often")
	flag.Parse()
	bin, err := findNginx(*nginx)
	if err == nil {
		err = run(os.Stdout, bin, pick(sites(*scale), *only), *keep)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "nginxbench:", err)
		os.Exit(1)
	}
}

func findNginx(flagged string) (string, error) {
	if flagged != "" {
		return flagged, nil
	}
	if p, err := exec.LookPath("nginx"); err == nil {
		return p, nil
	}
	if _, err := os.Stat("/usr/sbin/nginx"); err == nil {
		return "/usr/sbin/nginx", nil
	}
	return "", errors.New("nginx not found on PATH or at /usr/sbin/nginx (Debian: apt-get install nginx-light; or pass -nginx PATH)")
}

func pick(all []site, only string) []site {
	if only == "" {
		return all
	}
	want := strings.Split(only, ",")
	return slices.DeleteFunc(all, func(s site) bool { return !slices.Contains(want, s.name) })
}

func run(w io.Writer, bin string, ss []site, keep bool) error {
	if len(ss) == 0 {
		return errors.New("no sites selected")
	}
	dir, err := os.MkdirTemp("", "crawl-nginxbench-")
	if err != nil {
		return err
	}
	if keep {
		fmt.Fprintln(w, "working directory:", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	for i := range ss {
		if ss[i].port, err = freePort(); err != nil {
			return err
		}
		if err := writeSite(filepath.Join(dir, "site", ss[i].name), ss[i]); err != nil {
			return err
		}
	}
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, []byte(config(dir, ss)), 0o644); err != nil {
		return err
	}
	stop, err := startNginx(bin, dir, conf, ss)
	if err != nil {
		return err
	}
	sum, err := crawl(filepath.Join(dir, "store"), ss)
	if serr := stop(); err == nil {
		err = serr
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "nginxbench: %d sites behind nginx (%s), crawl took %s, stop reason %s\n\n",
		len(ss), bin, sum.Elapsed.Round(time.Millisecond), sum.StopReason)
	return report(w, dir, ss)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// writeSite writes pages p/0.html … p/N-1.html, each linking to its two children in a binary
// tree (index.html is page 0).
func writeSite(root string, s site) error {
	if err := os.MkdirAll(filepath.Join(root, "p"), 0o755); err != nil {
		return err
	}
	for i := range s.pages {
		var b strings.Builder
		fmt.Fprintf(&b, "<!doctype html><html><head><title>%s page %d</title></head><body><h1>page %d</h1>\n", s.name, i, i)
		for _, c := range []int{2*i + 1, 2*i + 2} {
			if c < s.pages {
				fmt.Fprintf(&b, "<a href=\"/p/%d.html\">page %d</a>\n", c, c)
			}
		}
		b.WriteString("</body></html>\n")
		name := filepath.Join(root, "p", strconv.Itoa(i)+".html")
		if i == 0 {
			name = filepath.Join(root, "index.html")
		}
		if err := os.WriteFile(name, []byte(b.String()), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// config is an nginx.conf running one unprivileged process in the foreground with every path
// under dir, one server per site on 127.0.0.1.
func config(dir string, ss []site) string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	p("daemon off;\nmaster_process off;\nworker_processes 1;")
	p("pid %s/nginx.pid;\nerror_log %s/error.log warn;", dir, dir)
	p("events { worker_connections 1024; }")
	p("http {")
	p("  default_type text/html;\n  keepalive_requests 100000;\n  keepalive_timeout 60s;")
	for _, t := range []string{"client_body", "proxy", "fastcgi", "uwsgi", "scgi"} {
		p("  %s_temp_path %s/tmp_%s;", t, dir, t)
	}
	p("  log_format bench '$msec $status $request_time $request_uri';")
	for _, s := range ss {
		if s.rate > 0 {
			p("  limit_req_zone $server_port zone=%s:1m rate=%dr/s;", s.name, s.rate)
		}
		if s.conn > 0 {
			p("  limit_conn_zone $server_port zone=%s_conn:1m;", s.name)
		}
		p("  server {")
		p("    listen 127.0.0.1:%d;", s.port)
		p("    root %s/site/%s;", dir, s.name)
		p("    access_log %s/%s.log bench;", dir, s.name)
		p("    location / {")
		if s.rate > 0 {
			opt := ""
			if s.burst > 0 {
				opt = fmt.Sprintf(" burst=%d", s.burst)
				if s.nodelay {
					opt += " nodelay"
				}
			}
			p("      limit_req zone=%s%s;", s.name, opt)
			if s.status != 0 {
				p("      limit_req_status %d;", s.status)
			}
		}
		if s.conn > 0 {
			p("      limit_conn %s_conn %d;", s.name, s.conn)
			if s.status != 0 {
				p("      limit_conn_status %d;", s.status)
			}
		}
		p("    }\n  }")
	}
	p("}")
	return b.String()
}

// startNginx runs nginx in the foreground and waits until every site accepts connections. stop
// ends it gracefully (SIGQUIT) so that the access logs are complete.
func startNginx(bin, dir, conf string, ss []site) (stop func() error, err error) {
	cmd := exec.Command(bin, "-p", dir, "-c", conf, "-e", filepath.Join(dir, "error.log"))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start nginx: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop = func() error {
		_ = cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-exited:
			return nil
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			return errors.New("nginx did not stop within 10s of SIGQUIT; killed")
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, s := range ss {
		for {
			c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", s.port), time.Second)
			if err == nil {
				c.Close()
				break
			}
			select {
			case werr := <-exited:
				log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
				return nil, fmt.Errorf("nginx exited (%v) before %s listened: %s", werr, s.name, log)
			case <-time.After(20 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				_ = stop()
				return nil, fmt.Errorf("nginx: %s not listening on %d after 10s", s.name, s.port)
			}
		}
	}
	return stop, nil
}

// traceEvery: print per-host controller state this often while crawling (0: never).
var traceEvery time.Duration

func crawl(store string, ss []site) (*crawler.Summary, error) {
	cfg := crawler.Defaults()
	cfg.Dir = store
	if traceEvery > 0 {
		names := map[string]string{}
		for _, s := range ss {
			names[fmt.Sprintf("127.0.0.1:%d", s.port)] = s.name
		}
		start := time.Now()
		cfg.StatusEvery = traceEvery
		cfg.Progress = func(st crawler.Status) {
			for _, h := range st.Hosts {
				paused := ""
				if h.PausedUntil != nil {
					paused = " PAUSED"
				}
				fmt.Printf("%6.2fs %-16s fetched %4d rate %7.2f win %d acc %6.2f infl %d p95 %6.1fms base %5.1fms over %2d%s\n",
					time.Since(start).Seconds(), names[h.Host], h.Pages, h.Rate, h.Window, h.AcceptedRate, h.InFlight, h.P95Ms, h.BaselineMs, h.OverLimit, paused)
			}
		}
	}
	for _, s := range ss {
		cfg.Seeds = append(cfg.Seeds, fmt.Sprintf("http://127.0.0.1:%d/", s.port))
	}
	c, err := crawler.Open(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	sum, err := c.Run(ctx)
	if cerr := c.Close(); err == nil {
		err = cerr
	}
	return sum, err
}

// entry is one access-log line: when the request arrived (log time less request time), its
// status, how long nginx took (a delaying limit_req included) and the URI.
type entry struct {
	arrived float64 // unix seconds
	status  int
	took    float64 // seconds
	uri     string
}

func readLog(path string) ([]entry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []entry
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		fs := strings.Fields(sc.Text())
		if len(fs) != 4 {
			return nil, fmt.Errorf("%s:%d: want 4 fields, got %q", path, n, sc.Text())
		}
		msec, err1 := strconv.ParseFloat(fs[0], 64)
		status, err2 := strconv.Atoi(fs[1])
		took, err3 := strconv.ParseFloat(fs[2], 64)
		if err := errors.Join(err1, err2, err3); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		out = append(out, entry{arrived: msec - took, status: status, took: took, uri: fs[3]})
	}
	slices.SortFunc(out, func(a, b entry) int {
		switch {
		case a.arrived < b.arrived:
			return -1
		case a.arrived > b.arrived:
			return 1
		}
		return 0
	})
	return out, sc.Err()
}

func report(w io.Writer, dir string, ss []site) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "site\tlimiter\tpages\tcomplete\trefused\tper page\trequests\tmakespan\tideal\tratio\tp95 nginx time\t")
	totalPages, totalGot, totalRefused := 0, 0, 0
	for _, s := range ss {
		log, err := readLog(filepath.Join(dir, s.name+".log"))
		if err != nil {
			return err
		}
		got, refused := map[string]bool{}, 0
		var took []float64
		for _, e := range log {
			switch {
			case e.status == 200:
				got[e.uri] = true
				took = append(took, e.took)
			case e.status == 503 || e.status == 429:
				refused++
			}
		}
		makespan := time.Duration(0)
		if len(log) > 0 {
			makespan = time.Duration((log[len(log)-1].arrived - log[0].arrived) * float64(time.Second))
		}
		ratio := "-"
		if id := s.ideal(); id > 0 {
			ratio = fmt.Sprintf("%.2fx", makespan.Seconds()/id.Seconds())
		}
		slices.Sort(took)
		p95 := 0.0
		if len(took) > 0 {
			p95 = took[min(len(took)-1, int(0.95*float64(len(took))))]
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.3f\t%d\t%.4f\t%d\t%s\t%s\t%s\t%.0fms\t\n", s.name, s.style(), s.pages,
			float64(len(got))/float64(s.pages), refused, float64(refused)/float64(s.pages), len(log),
			makespan.Round(10*time.Millisecond), s.ideal().Round(10*time.Millisecond), ratio, p95*1000)
		totalPages += s.pages
		totalGot += len(got)
		totalRefused += refused
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\noverall: completeness %.3f (%d/%d), refusals %d = %.2f%% of pages\n",
		float64(totalGot)/float64(totalPages), totalGot, totalPages, totalRefused, 100*float64(totalRefused)/float64(totalPages))
	return nil
}
