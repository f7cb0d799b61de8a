package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nlnwa/gowarc"

	"github.com/crawl-project/crawl/frontier"
	"github.com/crawl-project/crawl/internal/crawler"
	"github.com/crawl-project/crawl/internal/simweb"
)

// TestRecrawl: crawl run --recrawl revisits a finished crawl's pages with conditional GETs and
// fetches in full only the page that changed and those without validators; --older-than
// leaves recent pages alone and needs --recrawl.
func TestRecrawl(t *testing.T) {
	web, err := simweb.Start([]simweb.HostSpec{{Name: "a", Pages: 12, Revisions: true}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	dir := crawlSite(t, web)
	pages := len(web.Expected()["a"])
	if err := web.Change("a", "/p1"); err != nil {
		t.Fatal(err)
	}
	recrawl := func(args ...string) (int, string) {
		var out, errb bytes.Buffer
		code := runCmd(append([]string{"--data", dir, "--quiet", "--initial-rate", "1000"}, args...), &out, &errb)
		return code, errb.String()
	}

	web.Reset()
	code, stderr := recrawl("--recrawl", "--older-than", "1h")
	if st := web.Stats()["a"]; code != exitOK || st.PageRequests != 0 || strings.Contains(stderr, "revisiting") {
		t.Errorf("--older-than 1h right after the crawl: exit %d, %d page requests\n%s", code, st.PageRequests, stderr)
	}

	code, stderr = recrawl("--recrawl")
	if code != exitOK || !strings.Contains(stderr, "revisiting 12 fetched pages") {
		t.Fatalf("--recrawl: exit %d\n%s", code, stderr)
	}
	plain := pages / 4 // pages 3, 7, 11 send no validators
	st := web.Stats()["a"]
	t.Logf("recrawl of %d pages: %d requests, %d conditional, %d answered 304", pages, st.PageRequests, st.Conditional, st.NotModified)
	if st.PageRequests != pages || st.Conditional != pages-plain || st.NotModified != pages-plain-1 {
		t.Errorf("--recrawl: %d page requests, %d conditional, %d 304s; want %d, %d, %d", st.PageRequests, st.Conditional,
			st.NotModified, pages, pages-plain, pages-plain-1)
	}

	if code, stderr := recrawl("--older-than", "1h"); code != exitUsage || !strings.Contains(stderr, "--older-than needs --recrawl") {
		t.Errorf("--older-than without --recrawl: exit %d\n%s", code, stderr)
	}
}

// TestRecrawlStoresChangesOnly: a recrawl where pages answer 304, 200 with the body they had
// (pages without validators) or 200 with a new body stores only the new bodies; the exports
// still see every page's body: JSON Lines gives the unchanged 200s their body, the mirror
// holds each page as the site now serves it, and WARC writes a server-not-modified revisit
// record per 304 and an identical-payload-digest one, with the first answer's payload digest,
// per unchanged 200.
func TestRecrawlStoresChangesOnly(t *testing.T) {
	web, err := simweb.Start([]simweb.HostSpec{{Name: "a", Pages: 12, Revisions: true}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	dir := crawlSite(t, web)
	urls := web.Expected()["a"]
	bodies := storedBodies(dir)
	if bodies != len(urls) {
		t.Fatalf("the first crawl stored %d bodies for %d pages", bodies, len(urls))
	}
	// /p1 sends validators, /p3 none (simweb.ValidatorsOf).
	if err := web.Change("a", "/p1", "/p3"); err != nil {
		t.Fatal(err)
	}
	web.Reset()
	var out, errb bytes.Buffer
	if code := runCmd([]string{"--data", dir, "--quiet", "--initial-rate", "1000", "--recrawl"}, &out, &errb); code != exitOK {
		t.Fatalf("--recrawl: exit %d\n%s", code, errb.String())
	}
	plain := len(urls) / 4 // pages 3, 7, 11
	st := web.Stats()["a"]
	if st.PageRequests != len(urls) || st.Conditional != len(urls)-plain || st.NotModified != len(urls)-plain-1 {
		t.Fatalf("--recrawl: %d page requests, %d conditional, %d 304s; want %d, %d, %d", st.PageRequests, st.Conditional,
			st.NotModified, len(urls), len(urls)-plain, len(urls)-plain-1)
	}
	if got := storedBodies(dir); got != bodies+2 {
		t.Errorf("the recrawl stored %d bodies, want 2 (the changed pages')", got-bodies)
	}
	current := map[string][]byte{} // what the site serves now
	for _, u := range urls {
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		current[u], err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d, %v", u, resp.StatusCode, err)
		}
	}

	// JSON Lines: every 200 line has its body, the latest of each URL the one served now.
	jsonl := filepath.Join(t.TempDir(), "pages.jsonl")
	if code, _, stderr := runExport(t, "--data", dir, "--format", "jsonl", "--out", jsonl); code != exitOK {
		t.Fatalf("export jsonl: exit %d: %s", code, stderr)
	}
	latest := map[string]string{}
	for _, line := range readLines(t, jsonl) {
		var l struct {
			URL    string
			Status int
			Body   string
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatal(err)
		}
		if l.Status == 200 {
			if l.Body == "" {
				t.Errorf("jsonl: a 200 of %s without its body", l.URL)
			}
			latest[l.URL] = l.Body
		}
	}
	for u, body := range current {
		if latest[u] != string(body) {
			t.Errorf("jsonl: the last 200 of %s has a body of %d bytes, not the %d served now", u, len(latest[u]), len(body))
		}
	}

	// The mirror, as stored: one file per page, with the body served now.
	mirror := filepath.Join(t.TempDir(), "mirror")
	if code, _, stderr := runExport(t, "--data", dir, "--format", "mirror", "--out", mirror, "--convert-links=false"); code != exitOK {
		t.Fatalf("export mirror: exit %d: %s", code, stderr)
	}
	files := map[string]bool{}
	err = filepath.WalkDir(mirror, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		files[string(b)] = true
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for u, body := range current {
		if !files[string(body)] {
			t.Errorf("mirror: no file holds %s as served now", u)
		}
	}
	if len(files) != len(urls) {
		t.Errorf("mirror: %d distinct files for %d pages", len(files), len(urls))
	}

	// WARC: a revisit record per unchanged page, of the profile its answer calls for.
	warc := filepath.Join(t.TempDir(), "all.warc.gz")
	if code, _, stderr := runExport(t, "--data", dir, "--format", "warc", "--out", warc); code != exitOK {
		t.Fatalf("export warc: exit %d: %s", code, stderr)
	}
	digest := map[string]string{} // the first response's payload digest of each URL
	profiles := map[string]int{}
	responses := 0
	eachWARCRecord(t, warc, func(rec gowarc.WarcRecord) {
		h := rec.WarcHeader()
		target := h.Get(gowarc.WarcTargetURI)
		switch rec.Type() {
		case gowarc.Response:
			if !strings.HasSuffix(target, "/robots.txt") {
				responses++
			}
			if digest[target] == "" {
				digest[target] = h.Get(gowarc.WarcPayloadDigest)
			}
		case gowarc.Revisit:
			profile := h.Get(gowarc.WarcProfile)
			profiles[profile]++
			if strings.HasSuffix(profile, "/identical-payload-digest") && h.Get(gowarc.WarcPayloadDigest) != digest[target] {
				t.Errorf("warc: the revisit of %s has payload digest %s, its first response %s", target, h.Get(gowarc.WarcPayloadDigest), digest[target])
			}
		}
		rec.Close()
	})
	want := map[string]int{gowarc.ProfileServerNotModifiedV1_1: len(urls) - plain - 1, gowarc.ProfileIdenticalPayloadDigestV1_1: plain - 1}
	if !maps.Equal(profiles, want) || responses != len(urls)+2 {
		t.Errorf("warc: revisit records by profile %v, %d responses; want %v, %d", profiles, responses, want, len(urls)+2)
	}
}

// TestRecrawlNothingOldEnough: --recrawl --older-than with no page old enough says so, how many
// pages are too recent and when the oldest will be old enough, instead of a bare summary.
func TestRecrawlNothingOldEnough(t *testing.T) {
	t.Parallel()
	web, err := simweb.Start([]simweb.HostSpec{{Name: "a", Pages: 12, Revisions: true}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	before := time.Now().Truncate(time.Second)
	dir := crawlSite(t, web)
	after := time.Now()
	pages := len(web.Expected()["a"])

	web.Reset()
	var out, errb bytes.Buffer
	code := runCmd([]string{"--data", dir, "--quiet", "--recrawl", "--older-than", "24h"}, &out, &errb)
	stderr := errb.String()
	want := fmt.Sprintf("crawl: nothing to revisit: no fetched page is older than 24h (%d pages were last visited since); the oldest will be at ", pages)
	_, at, ok := strings.Cut(stderr, want)
	if code != exitOK || !ok || web.Stats()["a"].PageRequests != 0 {
		t.Fatalf("--recrawl --older-than 24h right after the crawl: exit %d, %d page requests; want a line starting %q\n%s",
			code, web.Stats()["a"].PageRequests, want, stderr)
	}
	due, err := time.ParseInLocation(time.DateTime, at[:min(len(at), len(time.DateTime))], time.Local)
	if err != nil || due.Before(before.Add(24*time.Hour)) || due.After(after.Add(24*time.Hour)) {
		t.Errorf("the oldest page is due at %q (%v); want between %v and %v, 24h after the crawl", at, err,
			before.Add(24*time.Hour), after.Add(24*time.Hour))
	}
}

// TestPrintRecrawlLeft: what --recrawl says it left alone: nothing to revisit in an empty store
// or among the pages the settings admit, nothing old enough (and when it will be), or the pages
// too recent beside those revisited.
func TestPrintRecrawlLeft(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.Local)
	for _, c := range []struct {
		name      string
		olderThan time.Duration
		revisited int
		ages      crawler.RecrawlAges
		want      string
	}{
		{"no fetched page", 0, 0, crawler.RecrawlAges{}, "crawl: nothing to revisit: the store holds no fetched page that the settings admit\n"},
		{"all revisited", 0, 5, crawler.RecrawlAges{Old: 5}, ""},
		{"none old enough", 2 * time.Hour, 0, crawler.RecrawlAges{Recent: 7, NextAt: now.Add(90 * time.Minute)},
			"crawl: nothing to revisit: no fetched page is older than 2h (7 pages were last visited since); the oldest will be at 2026-12-01 11:30:00 (in 1h30m)\n"},
		{"old ones not admitted", 24 * time.Hour, 0, crawler.RecrawlAges{Old: 3, Recent: 2, NextAt: now.Add(time.Hour)},
			"crawl: nothing to revisit: the store holds no fetched page that the settings admit older than 24h\n" +
				"crawl: 2 fetched pages newer than 24h left for a later run; the oldest of them will be old enough at 2026-12-01 11:00:00 (in 1h)\n"},
		{"some old enough", 90 * time.Second, 5, crawler.RecrawlAges{Old: 5, Recent: 1, NextAt: now.Add(30 * time.Second)},
			"crawl: 1 fetched page newer than 1m30s left for a later run; the oldest of them will be old enough at 2026-12-01 10:00:30 (in 30s)\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			printRecrawlLeft(&b, c.olderThan, frontier.Revised{Revisited: c.revisited}, c.ages, now)
			if b.String() != c.want {
				t.Errorf("wrote %q\nwant  %q", b.String(), c.want)
			}
		})
	}
}
