package crawler

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crawl-project/crawl/robots"
	"github.com/crawl-project/crawl/storage"
)

// hostileRobots returns a robots.txt of robots.MaxSize bytes that is one group of distinct
// User-agent lines: the file that cost a parser quadratic in a group's lines 17 s.
func hostileRobots() []byte {
	var b strings.Builder
	for i := 0; ; i++ {
		tok := []byte{'a'}
		for n := i; ; n /= 26 {
			tok = append(tok, byte('a'+n%26))
			if n < 26 {
				break
			}
		}
		line := "User-agent: " + string(tok) + "\n"
		if b.Len()+len(line) > robots.MaxSize {
			return []byte(b.String())
		}
		b.WriteString(line)
	}
}

// ordinarySite is a host of pages pages, all linked from "/", with a small robots.txt. It
// records how many distinct pages it served (a fetch retried after a timeout on a loaded
// machine is one page) and when it first served the last of them.
type ordinarySite struct {
	srv   *httptest.Server
	mu    sync.Mutex
	last  time.Time
	seen  map[string]bool
	pages int
}

func startOrdinary(t *testing.T, pages int) *ordinarySite {
	s := &ordinarySite{seen: map[string]bool{}}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			fmt.Fprint(w, "User-agent: *\nDisallow: /private/\n")
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<html><body>")
		if r.URL.Path == "/" {
			for i := 1; i < pages; i++ {
				fmt.Fprintf(w, `<a href="/p%d">p%d</a>`, i, i)
			}
		}
		fmt.Fprint(w, "</body></html>")
		s.mu.Lock()
		if !s.seen[r.URL.Path] {
			s.seen[r.URL.Path] = true
			s.last, s.pages = time.Now(), len(s.seen)
		}
		s.mu.Unlock()
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// TestHostileRobotsDoNotSlowOtherHosts crawls an ordinary host of 100 pages, its rate pinned
// at 50 requests a second, first alone and then beside 6 hosts that each serve a MaxSize
// robots.txt of distinct User-agent lines. Measured from the start of each crawl to the
// ordinary host's last page, the second crawl may take at most 3 times the first, plus a
// second: parsing the other hosts' robots.txt costs CPU, but must hold neither the dispatcher
// nor the ordinary host's fetches. (A parser quadratic in a group's lines spent about 17 s on
// each file, and the dispatcher waited for each parse.)
func TestHostileRobotsDoNotSlowOtherHosts(t *testing.T) {
	const pages, hostile = 100, 6
	body := hostileRobots()
	var hosts []string
	for range hostile {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/robots.txt" {
				w.Write(body)
				return
			}
			fmt.Fprint(w, "<html><body>hostile</body></html>")
		}))
		t.Cleanup(srv.Close)
		hosts = append(hosts, srv.URL+"/")
	}

	crawl := func(withHostile bool) time.Duration {
		site := startOrdinary(t, pages)
		cfg := hostileConfig(t)
		cfg.MaxHostPages = 0
		cfg.Timeout = 10 * time.Second // a loaded machine must not turn a slow answer into a retry or a failure
		cfg.InitialRate, cfg.MinRate, cfg.MaxRate = 50, 50, 50
		cfg.Seeds = []string{site.srv.URL + "/"}
		if withHostile {
			cfg.Seeds = append(cfg.Seeds, hosts...)
		}
		start := time.Now()
		sum := runCrawl(t, cfg)
		if sum.StopReason != "done" || sum.Queued != 0 {
			t.Fatalf("stop %q with %d queued; want done, 0", sum.StopReason, sum.Queued)
		}
		site.mu.Lock()
		defer site.mu.Unlock()
		if site.pages != pages {
			t.Fatalf("ordinary host served %d pages, want %d", site.pages, pages)
		}
		return site.last.Sub(start)
	}
	alone := crawl(false)
	beside := crawl(true)
	t.Logf("ordinary host alone: %v; beside %d hosts with a hostile robots.txt: %v", alone, hostile, beside)
	if beside > 3*alone+time.Second {
		t.Errorf("ordinary host took %v beside %d hosts with a hostile robots.txt, %v alone", beside, hostile, alone)
	}
}

// runStagedRobots runs the job that installs host's staged robots.txt copy (one read from the
// store or the shared cache), as the dispatcher would hand it to a worker; none if none is
// staged.
func runStagedRobots(t *testing.T, c *Crawler, host string) {
	t.Helper()
	c.mu.Lock()
	rs := &c.hostLocked(host).robots
	c.mu.Unlock()
	if j := c.installRobotsJob(host, rs); j.run != nil {
		if err := j.run(); err != nil {
			t.Fatal(err)
		}
	}
}

// A robots.txt copy read from the store (on a resumed crawl) is parsed by a job, not by the
// dispatcher that read it: the host's first job is the copy's install, after which its rules
// are in force and its next job is a page fetch, with no robots.txt request.
func TestStoredRobotsParsedInAJob(t *testing.T) {
	const host = "127.0.0.2:9"
	cfg := Defaults()
	cfg.Dir = t.TempDir()
	cfg.Seeds = []string{"http://" + host + "/"}
	c, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	now := time.Now()
	body := append([]byte("User-agent: *\nDisallow: /private/\n"), hostileRobots()[:robots.MaxSize/2]...)
	if err := c.db.PutRobots(storage.RobotsEntry{Host: host, Status: 200, Body: body, FetchedAt: now}); err != nil {
		t.Fatal(err)
	}
	j, _, err := c.nextJob(context.Background(), now, host)
	if err != nil {
		t.Fatal(err)
	}
	private, _ := url.Parse("http://" + host + "/private/a")
	if _, known := c.robotsVerdict(host, private); known || j.run == nil || j.page {
		t.Fatalf("first job %+v, rules known %v: want the stored copy's install job, the rules not parsed yet", j, known)
	}
	if j, _, _ := c.nextJob(context.Background(), now, host); j.run != nil {
		t.Fatalf("second job %+v while the install is under way, want none", j)
	}
	if err := j.run(); err != nil {
		t.Fatal(err)
	}
	if v, known := c.robotsVerdict(host, private); !known || v.Allowed {
		t.Errorf("/private/a after the install: %+v, known %v; want disallowed by the stored copy", v, known)
	}
	if j, _, err = c.nextJob(context.Background(), now, host); err != nil || !j.page {
		t.Errorf("job after the install: %+v, %v; want a page fetch", j, err)
	}
}
