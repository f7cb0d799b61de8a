package crawler

import (
	"bytes"
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
// machine is one page). Its pages (not its robots.txt) are answered once open is closed.
type ordinarySite struct {
	srv   *httptest.Server
	open  chan struct{}
	mu    sync.Mutex
	seen  map[string]bool
	pages int
}

func startOrdinary(t *testing.T, pages int) *ordinarySite {
	s := &ordinarySite{seen: map[string]bool{}, open: make(chan struct{})}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			fmt.Fprint(w, "User-agent: *\nDisallow: /private/\n")
			return
		}
		<-s.open
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<html><body>")
		if r.URL.Path == "/" {
			for i := 1; i < pages; i++ {
				fmt.Fprintf(w, `<a href="/p%d">p%d</a>`, i, i)
			}
		}
		fmt.Fprint(w, "</body></html>")
		s.mu.Lock()
		s.seen[r.URL.Path] = true
		s.pages = len(s.seen)
		s.mu.Unlock()
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *ordinarySite) served() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pages
}

// TestHostileRobotsDoNotSlowOtherHosts crawls an ordinary host of 100 pages beside 6 hosts
// that each serve a MaxSize robots.txt of distinct User-agent lines, and holds their parses
// (Crawler.parse) until the ordinary host has served every page, whose pages are answered only
// once all 6 parses are under way. A parse is its job's to spend (8 workers leave 2 free): it
// must hold neither the dispatcher nor another host's fetches, so the ordinary host is crawled
// to its end meanwhile. (A parse under the host's lock, which the dispatcher took to ask each
// host's state, held every host.) Events, not the wall clock: a crawl held by a parse makes no
// progress at all, which the test sees after parseStall without a page or a parse begun.
func TestHostileRobotsDoNotSlowOtherHosts(t *testing.T) {
	const pages, hostile, parseStall = 100, 6, 30 * time.Second
	body := hostileRobots()
	site := startOrdinary(t, pages)
	cfg := hostileConfig(t)
	cfg.MaxHostPages = 0
	cfg.Timeout = time.Minute // the ordinary host's "/" waits for the parses to begin
	cfg.InitialRate, cfg.MinRate, cfg.MaxRate = 50, 50, 50
	cfg.Seeds = []string{site.srv.URL + "/"}
	for range hostile {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/robots.txt" {
				w.Write(body)
				return
			}
			fmt.Fprint(w, "<html><body>hostile</body></html>")
		}))
		t.Cleanup(srv.Close)
		cfg.Seeds = append(cfg.Seeds, srv.URL+"/")
	}
	c, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// parsing counts the hostile parses under way; release ends them, once the ordinary host
	// has served every page or made no progress for parseStall.
	var mu sync.Mutex
	parsing, parsed := 0, 0
	var held time.Time // when the last parse began
	release := make(chan struct{})
	c.parse = func(status int, b []byte) *robots.Robots {
		if bytes.Equal(b, body) {
			mu.Lock()
			if parsing++; parsing == hostile {
				held = time.Now()
				close(site.open)
			}
			mu.Unlock()
			<-release
			mu.Lock()
			parsed++
			mu.Unlock()
		}
		return robots.FromResponse(status, b)
	}
	stalled := make(chan string, 1)
	go func() {
		defer close(release)
		last, lastAt := -1, time.Now()
		for now := range time.Tick(10 * time.Millisecond) {
			mu.Lock()
			n, under, since := site.served(), parsing, held
			mu.Unlock()
			if n == pages {
				t.Logf("the ordinary host served its %d pages in %v while %d hostile robots.txt parses were held", pages, now.Sub(since).Round(time.Millisecond), hostile)
				return
			}
			if n+under != last {
				last, lastAt = n+under, now
			} else if now.Sub(lastAt) >= parseStall {
				stalled <- fmt.Sprintf("%d of %d hostile robots.txt parses under way, the ordinary host served %d of its %d pages, and nothing moved for %v", under, hostile, n, pages, parseStall)
				return
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sum, err := c.Run(ctx)
	if cerr := c.Close(); cerr != nil {
		t.Errorf("Close: %v", cerr)
	}
	select {
	case why := <-stalled:
		t.Fatalf("a robots.txt parse held the other hosts: %s", why)
	default:
	}
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if sum.StopReason != "done" || sum.Queued != 0 {
		t.Fatalf("stop %q with %d queued; want done, 0", sum.StopReason, sum.Queued)
	}
	mu.Lock()
	defer mu.Unlock()
	if n := site.served(); n != pages || parsed != hostile {
		t.Fatalf("ordinary host served %d pages, %d hostile robots.txt parsed; want %d, %d", n, parsed, pages, hostile)
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
