// Command limiterbench crawls static sites served by a real nginx, each behind a real server's
// rate limiter, and prints what the servers' access logs recorded: pages fetched, refusals,
// makespan against the ideal at the configured limit, and latency. The simulated web
// (bench/crawlbench) is written by us and so shares our assumptions; these limiters are the ones
// real sites put in front of a crawler, each with its own arithmetic:
//
//   - nginx limit_req: a leaky bucket counted in milliseconds, with or without burst, nodelay or
//     delaying, 503 or 429, never a Retry-After of its own (req10-ra10 adds one, 10 s, through
//     an error_page location, as sites do);
//   - nginx limit_conn: refuses requests beyond a number in flight at once;
//   - HAProxy's stick-table rate counter (http_req_rate): a sliding-window count of the client's
//     requests over a period, refused ones included, so a client that keeps sending while
//     refused stays refused; with and without a Retry-After on the refusal;
//   - Apache's mod_evasive (served by Apache itself): more than DOSSiteCount requests within
//     DOSSiteInterval bans the client, 403 to everything and no Retry-After, until
//     DOSBlockingPeriod passes without a request from it;
//   - express-rate-limit (npm, served by Node's express): a fixed window per client that
//     starts at its first request, refused 429 with Retry-After and the rate-limit headers of
//     draft 8 (RateLimit, RateLimit-Policy), of draft 6 (RateLimit-Limit/-Remaining/-Reset) or
//     the legacy X-RateLimit-* (a Unix-time reset), or a bare 429 (express.go).
//
// None of the servers is a dependency of the project: the command looks for them on PATH (or
// -nginx, -haproxy, -apache) and says how to install them if they are missing (Debian: apt-get
// install nginx-light haproxy apache2 libapache2-mod-evasive nodejs npm); without HAProxy,
// Apache or Node their sites are skipped (each run installs the express-rate-limit sites' npm
// packages). Every server listens on 127.0.0.1 only. vhost10 is one nginx server seeded under
// two names (127.0.0.1 and localhost) whose limit applies to both together; compare a run with
// -key-by-ip.
//
//	go run -C bench ./limiterbench
//	go run -C bench ./limiterbench -only req10,hap10 -scale 2
//	go run -C bench ./limiterbench -only vhost10 -key-by-ip
//	go run -C bench ./limiterbench -delay 20ms -jitter 10ms
//
// -delay and -jitter carry every connection over a simulated network path (link.go), so that
// requests reach the limiter bunched and spread as they do across a real network.
package main

import (
	"bufio"
	"cmp"
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

// site is one static site, served by nginx, and the limiter in front of it: nginx's own
// (rate, conn) or HAProxy's (hapN).
type site struct {
	name    string
	pages   int
	rate    int  // limit_req rate, r/s; 0: no limit_req
	burst   int  // limit_req burst
	nodelay bool // limit_req nodelay: the burst passes at once instead of being spaced out
	status  int  // the refusal's status; 0: the server's default (nginx 503, HAProxy 403)
	// retryAfter > 0 adds "Retry-After: retryAfter" to limit_req's refusal (nginx sends none
	// itself; sites add it through an error_page location, as here).
	retryAfter int
	// conn is limit_conn per server (0: none): more requests in flight at once are refused.
	// Static pages leave nginx within a millisecond (the socket buffer takes them whole, even
	// under limit_rate), so this site checks that concurrency refusals are handled; it has no
	// capacity to compare a makespan with.
	conn int
	// hapN > 0 puts HAProxy in front of an unlimited nginx: a request is refused when the
	// client's request rate over hapPeriod seconds (HAProxy's sliding window, the refused
	// requests counted too) exceeds hapN. hapRetryAfter > 0 adds Retry-After: that many seconds.
	hapN, hapPeriod, hapRetryAfter int
	// evasiveN > 0 serves the site from Apache with mod_evasive: more than evasiveN requests
	// within evasivePeriod seconds ban the client for evasiveBlock seconds (restarted by every
	// request during the ban), every request answered 403.
	evasiveN, evasivePeriod, evasiveBlock int
	// erlN > 0 serves the site from Node's express behind express-rate-limit (express.go):
	// erlN requests per erlWindow seconds in a fixed window, robots.txt included, refused 429,
	// with the rate-limit headers of erlHeaders: "draft-8" (RateLimit and RateLimit-Policy
	// structured fields), "draft-6" (RateLimit-Limit, -Remaining, -Reset in seconds), "legacy"
	// (X-RateLimit-Limit, -Remaining, -Reset as a Unix time) or "none" (a bare 429).
	erlN, erlWindow int
	erlHeaders      string
	// twoNames seeds the site under two names of the one server, 127.0.0.1 and localhost (its
	// limit then applies to both together, as a limit keyed by client address across virtual
	// hosts does): each name's crawl fetches every page, so 2 × pages requests are needed.
	twoNames bool

	port    int // where the site's server (nginx, HAProxy or Apache) listens
	backend int // nginx's port behind HAProxy
	dial    int // where the crawler connects: port, or the -delay/-jitter link's end
}

func (s site) haproxy() bool { return s.hapN > 0 }
func (s site) apache() bool  { return s.evasiveN > 0 }
func (s site) express() bool { return s.erlN > 0 }

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
		if s.retryAfter > 0 {
			p += fmt.Sprintf(" Retry-After %d", s.retryAfter)
		}
		parts = append(parts, p)
	}
	if s.conn > 0 {
		parts = append(parts, fmt.Sprintf("limit_conn %d", s.conn))
	}
	if s.haproxy() {
		p := fmt.Sprintf("haproxy rate > %d/%ds", s.hapN, s.hapPeriod)
		if s.hapRetryAfter > 0 {
			p += fmt.Sprintf(" Retry-After %d", s.hapRetryAfter)
		}
		parts = append(parts, p)
	}
	if s.apache() {
		parts = append(parts, fmt.Sprintf("mod_evasive > %d/%ds, ban %ds", s.evasiveN, s.evasivePeriod, s.evasiveBlock))
	}
	if s.express() {
		parts = append(parts, fmt.Sprintf("express-rate-limit %d/%ds %s", s.erlN, s.erlWindow, s.erlHeaders))
	}
	if len(parts) == 0 {
		return "none"
	}
	if s.twoNames {
		parts = append(parts, "2 names")
	}
	st := s.status
	if st == 0 {
		st = 503
		if s.haproxy() || s.apache() {
			st = 403
		}
		if s.express() {
			st = 429
		}
	}
	return strings.Join(parts, ", ") + fmt.Sprintf(" (%d)", st)
}

// ideal is the makespan of a client that knew the limit: every page at the rate, less what the
// burst saves (for HAProxy: a full period's allowance at once); 0 where no rate limits the site.
func (s site) ideal() time.Duration {
	rate, burst := float64(s.rate), s.burst
	if s.haproxy() {
		rate, burst = float64(s.hapN)/float64(s.hapPeriod), s.hapN
	}
	if s.apache() {
		rate, burst = float64(s.evasiveN)/float64(s.evasivePeriod), s.evasiveN
	}
	if s.express() {
		rate, burst = float64(s.erlN)/float64(s.erlWindow), s.erlN
	}
	pages := s.pages
	if s.twoNames {
		pages *= 2
	}
	if rate > 0 {
		return time.Duration(float64(max(pages-burst, 0)) / rate * float64(time.Second))
	}
	return 0
}

func sites(scale int) []site {
	all := []site{
		{name: "req10", pages: 150, rate: 10},
		{name: "req5-429", pages: 100, rate: 5, status: 429},
		{name: "req10-b5", pages: 150, rate: 10, burst: 5, nodelay: true, status: 429},
		{name: "req10-ra10", pages: 150, rate: 10, status: 429, retryAfter: 10},
		{name: "req20-b10-delay", pages: 300, rate: 20, burst: 10},
		{name: "req40-b20", pages: 600, rate: 40, burst: 20, nodelay: true},
		{name: "req10-b20", pages: 300, rate: 10, burst: 20, nodelay: true},
		{name: "req2-b40", pages: 120, rate: 2, burst: 40, nodelay: true},
		{name: "conn2", pages: 300, conn: 2},
		{name: "hap10", pages: 150, hapN: 10, hapPeriod: 1, status: 429},
		{name: "hap20-ra1", pages: 300, hapN: 20, hapPeriod: 1, hapRetryAfter: 1, status: 429},
		{name: "hap100-10s", pages: 300, hapN: 100, hapPeriod: 10, status: 429},
		{name: "evasive50", pages: 300, evasiveN: 50, evasivePeriod: 1, evasiveBlock: 5},
		{name: "vhost10", pages: 150, rate: 10, twoNames: true},
		{name: "erl-d8", pages: 200, erlN: 20, erlWindow: 2, erlHeaders: "draft-8"},
		{name: "erl-d6", pages: 200, erlN: 20, erlWindow: 2, erlHeaders: "draft-6"},
		{name: "erl-x", pages: 200, erlN: 20, erlWindow: 2, erlHeaders: "legacy"},
		{name: "erl-x1", pages: 100, erlN: 10, erlWindow: 1, erlHeaders: "legacy"},
		{name: "erl-bare", pages: 200, erlN: 20, erlWindow: 2, erlHeaders: "none"},
		{name: "free", pages: 300},
	}
	for i := range all {
		all[i].pages *= max(scale, 1)
	}
	return all
}

func main() {
	nginx := flag.String("nginx", "", "path to the nginx binary (default: nginx on PATH, then /usr/sbin/nginx)")
	haproxy := flag.String("haproxy", "", "path to the haproxy binary (default: haproxy on PATH, then /usr/sbin/haproxy; without it the HAProxy sites are skipped)")
	apache := flag.String("apache", "", "path to the apache2 binary (default: apache2 on PATH, then /usr/sbin/apache2; without it, or without mod_evasive, the mod_evasive sites are skipped)")
	only := flag.String("only", "", "comma-separated site names to crawl (default: all)")
	scale := flag.Int("scale", 1, "multiply every site's page count by this")
	keep := flag.Bool("keep", false, "keep the working directory (server configs, logs, crawl store) and print it")
	flag.BoolVar(&keyByIP, "key-by-ip", false, "crawl with --key-by-ip (one gate per server address: vhost10's two names share one)")
	flag.DurationVar(&network.delay, "delay", 0, "carry every connection over a link that delays each chunk of bytes this long, each way")
	flag.DurationVar(&network.jitter, "jitter", 0, "and by up to this much more or less (uniform), in order within a connection")
	flag.DurationVar(&traceEvery, "trace", 0, "print each host's controller state (rate, window, accepted rate, in flight, p95) this often")
	flag.Parse()
	ss := pick(sites(*scale), *only)
	var bins servers
	var err error
	bins.nginx, err = findServer(*nginx, "nginx", "nginx-light")
	if err == nil && slices.ContainsFunc(ss, site.haproxy) {
		if bins.haproxy, err = findServer(*haproxy, "haproxy", "haproxy"); err != nil {
			fmt.Fprintf(os.Stderr, "limiterbench: %v: skipping the HAProxy sites\n", err)
			ss, err = slices.DeleteFunc(ss, site.haproxy), nil
		}
	}
	if err == nil && slices.ContainsFunc(ss, site.apache) {
		if bins.apache, err = findServer(*apache, "apache2", "apache2"); err == nil {
			_, err = os.Stat(evasiveModule)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "limiterbench: %v (Debian: apt-get install apache2 libapache2-mod-evasive): skipping the mod_evasive sites\n", err)
			ss, err = slices.DeleteFunc(ss, site.apache), nil
		}
	}
	if err == nil && slices.ContainsFunc(ss, site.express) {
		if bins.node, err = findNode(); err != nil {
			fmt.Fprintf(os.Stderr, "limiterbench: %v: skipping the express-rate-limit sites\n", err)
			ss, err = slices.DeleteFunc(ss, site.express), nil
		}
	}
	if err == nil {
		err = run(os.Stdout, bins, ss, *keep)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "limiterbench:", err)
		os.Exit(1)
	}
}

// servers holds the paths of the server binaries; haproxy, apache and node are empty when no
// site needs them.
type servers struct {
	nginx, haproxy, apache string
	node                   node
}

// apacheModules is where Debian's apache2 keeps its modules; evasiveModule is mod_evasive's.
const (
	apacheModules = "/usr/lib/apache2/modules"
	evasiveModule = apacheModules + "/mod_evasive20.so"
)

func findServer(flagged, name, pkg string) (string, error) {
	if flagged != "" {
		return flagged, nil
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	p := "/usr/sbin/" + name
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("%s not found on PATH or in /usr/sbin (Debian: apt-get install %s; or pass -%s PATH)", name, pkg, name)
}

func pick(all []site, only string) []site {
	if only == "" {
		return all
	}
	want := strings.Split(only, ",")
	return slices.DeleteFunc(all, func(s site) bool { return !slices.Contains(want, s.name) })
}

func run(w io.Writer, bins servers, ss []site, keep bool) error {
	if len(ss) == 0 {
		return errors.New("no sites selected")
	}
	dir, err := os.MkdirTemp("", "crawl-limiterbench-")
	if err != nil {
		return err
	}
	if keep {
		fmt.Fprintln(w, "working directory:", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	var nginxPorts, hapPorts, apachePorts, expressPorts []int
	for i := range ss {
		if ss[i].port, err = freePort(); err != nil {
			return err
		}
		ss[i].backend = ss[i].port
		switch {
		case ss[i].haproxy():
			if ss[i].backend, err = freePort(); err != nil {
				return err
			}
			hapPorts = append(hapPorts, ss[i].port)
			nginxPorts = append(nginxPorts, ss[i].backend)
		case ss[i].apache():
			apachePorts = append(apachePorts, ss[i].port)
		case ss[i].express():
			expressPorts = append(expressPorts, ss[i].port)
		default:
			nginxPorts = append(nginxPorts, ss[i].backend)
		}
		if err := writeSite(filepath.Join(dir, "site", ss[i].name), ss[i]); err != nil {
			return err
		}
	}
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, []byte(nginxConfig(dir, ss)), 0o644); err != nil {
		return err
	}
	stopNginx, err := start("nginx", exec.Command(bins.nginx, "-p", dir, "-c", conf, "-e", filepath.Join(dir, "error.log")),
		syscall.SIGQUIT, filepath.Join(dir, "error.log"), nginxPorts)
	if err != nil {
		return err
	}
	stopHAProxy := func() error { return nil }
	if len(hapPorts) > 0 {
		hconf := filepath.Join(dir, "haproxy.cfg")
		if err := os.WriteFile(hconf, []byte(haproxyConfig(ss)), 0o644); err != nil {
			_ = stopNginx()
			return err
		}
		// HAProxy logs to its stdout (log stdout in the config), so that file is its access log.
		stopHAProxy, err = start("haproxy", exec.Command(bins.haproxy, "-db", "-f", hconf),
			syscall.SIGUSR1, filepath.Join(dir, "haproxy.log"), hapPorts)
		if err != nil {
			_ = stopNginx()
			return err
		}
	}
	stopApache := func() error { return nil }
	if len(apachePorts) > 0 {
		aconf := filepath.Join(dir, "apache.conf")
		if err := os.WriteFile(aconf, []byte(apacheConfig(dir, ss)), 0o644); err != nil {
			_ = errors.Join(stopHAProxy(), stopNginx())
			return err
		}
		// SIGWINCH is Apache's graceful stop: requests in flight finish and the logs are complete.
		stopApache, err = start("apache", exec.Command(bins.apache, "-f", aconf, "-DFOREGROUND"),
			syscall.SIGWINCH, filepath.Join(dir, "apache-error.log"), apachePorts)
		if err != nil {
			_ = errors.Join(stopHAProxy(), stopNginx())
			return err
		}
	}
	stopExpress := func() error { return nil }
	if len(expressPorts) > 0 {
		if stopExpress, err = startExpress(bins.node, dir, ss, expressPorts); err != nil {
			_ = errors.Join(stopApache(), stopHAProxy(), stopNginx())
			return err
		}
	}
	var stopLinks []func()
	for i := range ss {
		ss[i].dial = ss[i].port
		if network.on() && err == nil {
			var stop func()
			if ss[i].dial, stop, err = network.forward(ss[i].port); err == nil {
				stopLinks = append(stopLinks, stop)
			}
		}
	}
	var sum *crawler.Summary
	if err == nil {
		sum, err = crawl(filepath.Join(dir, "store"), ss)
	}
	for _, stop := range stopLinks {
		stop()
	}
	if serr := errors.Join(stopExpress(), stopApache(), stopHAProxy(), stopNginx()); err == nil {
		err = serr
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "limiterbench: %d sites behind %s, crawl took %s, stop reason %s\n\n",
		len(ss), strings.Join(slices.DeleteFunc([]string{bins.nginx, bins.haproxy, bins.apache, bins.node.node}, func(s string) bool { return s == "" }), " and "),
		sum.Elapsed.Round(time.Millisecond), sum.StopReason)
	if network.on() {
		fmt.Fprintf(w, "every connection carried over a link: %s\n\n", network)
	}
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

// nginxConfig is an nginx.conf running one unprivileged process in the foreground with every
// path under dir, one server per site on 127.0.0.1 (on the backend port, unlimited, for a site
// HAProxy fronts).
func nginxConfig(dir string, ss []site) string {
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
	p("  log_format bench '$msec $status $request_time $host$request_uri';") // a site may have two names
	for _, s := range ss {
		if s.apache() || s.express() {
			continue
		}
		if s.rate > 0 {
			p("  limit_req_zone $server_port zone=%s:1m rate=%dr/s;", s.name, s.rate)
		}
		if s.conn > 0 {
			p("  limit_conn_zone $server_port zone=%s_conn:1m;", s.name)
		}
		p("  server {")
		p("    listen 127.0.0.1:%d;", s.backend)
		p("    root %s/site/%s;", dir, s.name)
		if s.haproxy() {
			p("    access_log off;")
		} else {
			p("    access_log %s/%s.log bench;", dir, s.name)
		}
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
			if s.retryAfter > 0 {
				p("      error_page %d @%s_refused;", s.status, s.name)
			}
		}
		if s.conn > 0 {
			p("      limit_conn %s_conn %d;", s.name, s.conn)
			if s.status != 0 {
				p("      limit_conn_status %d;", s.status)
			}
		}
		p("    }")
		if s.rate > 0 && s.retryAfter > 0 {
			p("    location @%s_refused {", s.name)
			p("      add_header Retry-After %d always;", s.retryAfter)
			p("      return %d;", s.status)
			p("    }")
		}
		p("  }")
	}
	p("}")
	return b.String()
}

// haproxyConfig fronts each HAProxy site's nginx with the stick-table rate limit HAProxy's own
// documentation and blog teach: track the client's address, refuse while its http_req_rate over
// the period is above the limit. Requests are logged to stdout as
// "frontend accept-time status active-ms uri".
func haproxyConfig(ss []site) string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	p("global\n  log stdout format raw local0\n  maxconn 4096")
	p("defaults\n  mode http\n  log global\n  option dontlognull\n  option http-keep-alive")
	p("  timeout connect 5s\n  timeout client 60s\n  timeout server 60s\n  timeout http-keep-alive 60s")
	p(`  log-format "%%f %%Ts.%%ms %%ST %%Ta %%HU"`)
	for _, s := range ss {
		if !s.haproxy() {
			continue
		}
		p("frontend %s", s.name)
		p("  bind 127.0.0.1:%d", s.port)
		p("  stick-table type ip size 1k expire 60s store http_req_rate(%ds)", s.hapPeriod)
		p("  http-request track-sc0 src")
		deny := "http-request deny"
		if s.status != 0 {
			deny += fmt.Sprintf(" deny_status %d", s.status)
		}
		if s.hapRetryAfter > 0 {
			deny += fmt.Sprintf(" hdr Retry-After %d", s.hapRetryAfter)
		}
		p("  %s if { sc_http_req_rate(0) gt %d }", deny, s.hapN)
		p("  default_backend %s_nginx", s.name)
		p("backend %s_nginx\n  server nginx 127.0.0.1:%d", s.name, s.backend)
	}
	return b.String()
}

// apacheConfig serves each mod_evasive site from one Apache process (one child, so one set of
// mod_evasive counters) on 127.0.0.1, every path under dir. Requests are logged to NAME.log as
// "arrival-time status 0 uri" (the server time is not measured: static files).
func apacheConfig(dir string, ss []site) string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	p("ServerRoot %s\nPidFile %s/apache.pid\nServerName localhost", dir, dir)
	for _, m := range []string{"mpm_event", "authz_core", "mime", "dir"} {
		p("LoadModule %s_module %s/mod_%s.so", m, apacheModules, m)
	}
	p("LoadModule evasive20_module %s", evasiveModule)
	p("ServerLimit 1\nStartServers 1\nThreadsPerChild 32\nMaxRequestWorkers 32")
	p("TypesConfig /etc/mime.types\nDirectoryIndex index.html\nErrorLog %s/apache-error.log", dir)
	p(`LogFormat "%%{begin:sec}t.%%{begin:msec_frac}t %%>s 0 %%U" bench`)
	for _, s := range ss {
		if !s.apache() {
			continue
		}
		p("Listen 127.0.0.1:%d", s.port)
		p("<VirtualHost 127.0.0.1:%d>", s.port)
		p("  DocumentRoot %s/site/%s\n  CustomLog %s/%s.log bench", dir, s.name, dir, s.name)
		p("  <Directory %s/site/%s>\n    Require all granted\n  </Directory>", dir, s.name)
		p("</VirtualHost>")
		// mod_evasive's settings are server-wide (its counters are per client address): one
		// mod_evasive site per run is what this supports.
		p("DOSHashTableSize 3097\nDOSPageCount 100000\nDOSPageInterval 1")
		p("DOSSiteCount %d\nDOSSiteInterval %d\nDOSBlockingPeriod %d", s.evasiveN, s.evasivePeriod, s.evasiveBlock)
		p("DOSLogDir %s", dir)
	}
	return b.String()
}

// start runs a server in the foreground, its output to logPath, and waits until every port
// accepts connections. stop ends it gracefully with sig, so that its logs are complete.
func start(name string, cmd *exec.Cmd, sig syscall.Signal, logPath string, ports []int) (stop func() error, err error) {
	out, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		out.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait(); out.Close() }()
	stop = func() error {
		_ = cmd.Process.Signal(sig)
		select {
		case <-exited:
			return nil
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			return fmt.Errorf("%s did not stop within 10s of %v; killed", name, sig)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, port := range ports {
		for {
			c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
			if err == nil {
				c.Close()
				break
			}
			select {
			case werr := <-exited:
				log, _ := os.ReadFile(logPath)
				return nil, fmt.Errorf("%s exited (%v) before port %d listened: %s", name, werr, port, log)
			case <-time.After(20 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				_ = stop()
				return nil, fmt.Errorf("%s: port %d not listening after 10s", name, port)
			}
		}
	}
	return stop, nil
}

// traceEvery: print per-host controller state this often while crawling (0: never).
var traceEvery time.Duration

// network is the link every connection is carried over (-delay, -jitter; none by default).
var network link

// keyByIP crawls with Config.KeyByIP.
var keyByIP bool

func crawl(store string, ss []site) (*crawler.Summary, error) {
	cfg := crawler.Defaults()
	cfg.Dir = store
	cfg.KeyByIP = keyByIP
	if traceEvery > 0 {
		names := map[string]string{}
		for _, s := range ss {
			names[fmt.Sprintf("127.0.0.1:%d", s.dial)] = s.name
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
		cfg.Seeds = append(cfg.Seeds, fmt.Sprintf("http://127.0.0.1:%d/", s.dial))
		if s.twoNames {
			cfg.Seeds = append(cfg.Seeds, fmt.Sprintf("http://localhost:%d/", s.dial))
		}
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

// entry is one access-log line: when the request arrived, its status, how long the server took
// (a delaying limit_req included) and the URI.
type entry struct {
	arrived float64 // unix seconds
	status  int
	took    float64 // seconds
	uri     string
}

// readLog reads a site's requests: from nginx's log for the site (lines "end-time status
// seconds uri"), or from HAProxy's shared log (lines "frontend accept-time status ms uri"; other
// lines, HAProxy's own notices, are skipped).
func readLog(dir string, s site) ([]entry, error) {
	path := filepath.Join(dir, s.name+".log")
	if s.haproxy() {
		path = filepath.Join(dir, "haproxy.log")
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []entry
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		fs := strings.Fields(sc.Text())
		if s.haproxy() {
			if len(fs) != 5 || fs[0] != s.name {
				continue
			}
			fs = fs[1:]
		}
		if len(fs) != 4 {
			return nil, fmt.Errorf("%s:%d: want 4 fields, got %q", path, n, sc.Text())
		}
		t, err1 := strconv.ParseFloat(fs[0], 64)
		status, err2 := strconv.Atoi(fs[1])
		took, err3 := strconv.ParseFloat(fs[2], 64)
		if err := errors.Join(err1, err2, err3); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		e := entry{arrived: t - took, status: status, took: took, uri: fs[3]}
		if s.haproxy() {
			e.arrived, e.took = t, took/1000
		}
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b entry) int { return cmp.Compare(a.arrived, b.arrived) })
	return out, sc.Err()
}

func report(w io.Writer, dir string, ss []site) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "site\tlimiter\tpages\tcomplete\trefused\tper page\trequests\tmakespan\tideal\tratio\tp95 server time\t")
	totalPages, totalGot, totalRefused := 0, 0, 0
	for _, s := range ss {
		pages := s.pages
		if s.twoNames {
			pages *= 2 // every page under each name
		}
		log, err := readLog(dir, s)
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
			case e.status == 503 || e.status == 429 || e.status == 403:
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
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.3f\t%d\t%.4f\t%d\t%s\t%s\t%s\t%.0fms\t\n", s.name, s.style(), pages,
			float64(len(got))/float64(pages), refused, float64(refused)/float64(pages), len(log),
			makespan.Round(10*time.Millisecond), s.ideal().Round(10*time.Millisecond), ratio, p95*1000)
		totalPages += pages
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
