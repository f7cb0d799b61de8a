package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/crawl-project/crawl/internal/crawler"
	"github.com/crawl-project/crawl/internal/dnstest"
	"github.com/crawl-project/crawl/internal/render"
	"github.com/crawl-project/crawl/internal/simweb"
)

// startApp serves an App web (simweb) on one loopback listener and a DNS server resolving its
// names there; both close with the test. It returns the web, the app and the DNS address.
func startApp(t *testing.T, o simweb.AppOptions) (*simweb.Web, *simweb.App, string) {
	t.Helper()
	app := simweb.NewApp(o)
	web, err := simweb.Start(app.Specs, &simweb.Options{VirtualHosts: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(web.Close)
	dns, err := dnstest.Start(&dnstest.Options{Resolve: func(name string) []netip.Addr {
		switch name {
		case simweb.AppSite, simweb.AppAPI, simweb.AppCDN:
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dns.Close)
	return web, app, dns.Addr()
}

// browsersUnder returns the pids of the processes whose command line names dir (the profile
// directories of the browsers a crawl started with TMPDIR=dir).
func browsersUnder(dir string) []string {
	var pids []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(b, []byte(dir)) {
			pids = append(pids, e.Name())
		}
	}
	return pids
}

// TestRenderKilledResumedExported: a crawl rendering an App web is killed with SIGKILL in the
// middle; no browser process outlives it; the same command resumes it (--render is stored)
// and completes it with nothing lost; the JSON Lines export reads every page's rendered
// content with --field, and says it was rendered; each CDN file was fetched once in all.
func TestRenderKilledResumedExported(t *testing.T) {
	if render.FindBrowser() == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("no Chromium or Chrome on PATH, and CI=true: install it (Debian: apt-get install chromium)")
		}
		t.Skip("no Chromium or Chrome on PATH")
	}
	if _, err := os.Stat("/proc/self/cmdline"); err != nil {
		t.Skip("needs /proc to find browser processes")
	}
	const pages = 30
	web, app, dnsAddr := startApp(t, simweb.AppOptions{Pages: pages, APILimit: 8, APIHeaders: simweb.HeadersIETF, CDNLimit: 15})
	_, port, _ := net.SplitHostPort(web.Addr())
	site := "http://" + simweb.AppSite + ":" + port
	dir := t.TempDir()
	tmp := t.TempDir() // the browsers' profiles go here (TMPDIR), so that theirs are told apart
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	args := []string{"run", "--data", dir, "--dns-server", dnsAddr, "--render", "always", "--render-tabs", "2", site + simweb.AppPagePath(0)}

	cmd, out := crawlProcess(ctx, args...)
	cmd.Env = append(cmd.Env, "TMPDIR="+tmp)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for rendered := 0; rendered < 3; {
		if ctx.Err() != nil {
			t.Fatalf("no page rendered in time:\n%s", out)
		}
		time.Sleep(50 * time.Millisecond)
		if st, err := crawler.ReadStatusFile(dir); err == nil && st.Render != nil {
			rendered = st.Render.Rendered
		}
	}
	if len(browsersUnder(tmp)) == 0 {
		t.Fatal("no browser process found while the crawl renders: the test cannot see them")
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	deadline := time.Now().Add(15 * time.Second)
	for len(browsersUnder(tmp)) > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if left := browsersUnder(tmp); len(left) > 0 {
		t.Errorf("browser processes %v outlived the crawl killed with SIGKILL", left)
	}

	cmd, out = crawlProcess(ctx, "run", "--data", dir, "--dns-server", dnsAddr) // resumed with the stored --render
	cmd.Env = append(cmd.Env, "TMPDIR="+tmp)
	if err := cmd.Run(); err != nil {
		t.Fatalf("resumed crawl: %v\n%s", err, out)
	}
	if !strings.Contains(out.String(), fmt.Sprintf("rendered %d of %d HTML pages", pages, pages)) {
		t.Errorf("the summary does not say every page was rendered:\n%s", out)
	}

	cmd, out = crawlProcess(ctx, "status", "--data", dir)
	if err := cmd.Run(); err != nil || !strings.Contains(out.String(), fmt.Sprintf("rendered %d of %d HTML pages (--render always)", pages, pages)) {
		t.Errorf("crawl status of the stopped crawl (%v) does not say every page was rendered:\n%s", err, out)
	}

	file := filepath.Join(t.TempDir(), "pages.jsonl")
	cmd, out = crawlProcess(ctx, "export", "--data", dir, "--format", "jsonl", "--out", file, "--field", "content=p.content", "--field", "h1=h1")
	if err := cmd.Run(); err != nil {
		t.Fatalf("export: %v\n%s", err, out)
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got := map[string]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var line struct {
			URL      string
			Rendered bool
			Fields   map[string]*string
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("export line %q: %v", sc.Text(), err)
		}
		if !strings.Contains(line.URL, "/app/") {
			continue
		}
		if !line.Rendered || line.Fields["content"] == nil {
			t.Errorf("%s: rendered %v, fields %v", line.URL, line.Rendered, line.Fields)
			continue
		}
		got[line.URL] = *line.Fields["content"]
	}
	for i := range pages {
		u := site + simweb.AppPagePath(i)
		if got[u] != simweb.AppText(i) {
			t.Errorf("%s: exported content %q, want %q", u, got[u], simweb.AppText(i))
		}
	}
	for _, p := range simweb.CDNPaths {
		if n := app.CDNFetches()[p]; n != 1 {
			t.Errorf("CDN %s fetched %d times over both runs, want 1", p, n)
		}
	}
	for name, s := range web.Stats() {
		if s.RobotsViolations > 0 {
			t.Errorf("%s: %d requests to paths robots.txt disallows", name, s.RobotsViolations)
		}
	}
}
