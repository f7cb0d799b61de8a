package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nlnwa/gowarc"

	"github.com/crawl-project/crawl/internal/export"
	"github.com/crawl-project/crawl/internal/simweb"
	"github.com/crawl-project/crawl/storage"
)

// storeFetches reads the fetch times of every page of the store in dir, by URL, in fetch order.
func storeFetches(t *testing.T, dir string) map[string][]time.Time {
	t.Helper()
	db, err := storage.Open(dir, &storage.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	m := map[string][]time.Time{}
	err = db.PagesMeta(func(p *storage.Page) error {
		m[p.URL] = append(m[p.URL], p.FetchedAt.UTC().Truncate(time.Microsecond))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// mergeWant is, for each URL of the stores, the fetch times an export of them all must hold:
// those of the store that fetched it last (the first store on a tie).
func mergeWant(stores []map[string][]time.Time) map[string][]time.Time {
	want := map[string][]time.Time{}
	for _, s := range stores {
		for u, ts := range s {
			if cur, ok := want[u]; !ok || ts[len(ts)-1].After(cur[len(cur)-1]) {
				want[u] = ts
			}
		}
	}
	return want
}

// crawlInto crawls seeds (none: the store's own, as --recrawl does) into dir with extra flags.
func crawlInto(t *testing.T, dir string, seeds []string, args ...string) {
	t.Helper()
	var out, errb bytes.Buffer
	args = append([]string{"--data", dir, "--quiet", "--initial-rate", "1000"}, args...)
	if seeds != nil {
		args = append([]string{"--seeds", writeSeeds(t, seeds)}, args...)
	}
	if code := runCmd(args, &out, &errb); code != exitOK {
		t.Fatalf("crawl run %q: exit %d\n%s", args, code, errb.String())
	}
}

// TestExportSeveralStores: three real crawls of one simulated web — A both hosts, B host b then
// a recrawl of it (304 revisits), C a few pages of host a — exported together write each URL
// once, from the store that fetched it last with that store's versions, in all three formats.
func TestExportSeveralStores(t *testing.T) {
	t.Parallel()
	web, err := simweb.Start([]simweb.HostSpec{{Name: "a", Pages: 12}, {Name: "b", Pages: 12, Revisions: true}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	base := t.TempDir()
	dirA, dirB, dirC := filepath.Join(base, "a"), filepath.Join(base, "b"), filepath.Join(base, "c")
	crawlInto(t, dirA, web.Seeds())
	crawlInto(t, dirB, []string{web.URL("b")})
	crawlInto(t, dirB, nil, "--recrawl")
	crawlInto(t, dirC, []string{web.URL("a")}, "--max-pages", "4")

	stores := []map[string][]time.Time{storeFetches(t, dirA), storeFetches(t, dirB), storeFetches(t, dirC)}
	want := mergeWant(stores)
	pages, superseded := 0, 0
	for _, ts := range want {
		pages += len(ts)
	}
	for _, s := range stores {
		for _, ts := range s {
			superseded += len(ts)
		}
	}
	superseded -= pages
	// The crawls overlap as intended: b's URLs twice in B, later than A's; C's few a URLs later than A's.
	if rootB := want[web.URL("b")]; len(rootB) != 2 || len(stores[1][web.URL("b")]) != 2 {
		t.Fatalf("b's root: %v in the export, want B's two fetches", rootB)
	}
	if len(stores[2]) == 0 || len(stores[2]) >= len(stores[0]) || !slices.Equal(want[web.URL("a")], stores[2][web.URL("a")]) {
		t.Fatalf("C fetched %d URLs (A %d); a's root %v", len(stores[2]), len(stores[0]), want[web.URL("a")])
	}
	datas := []string{"--data", dirA, "--data", dirB, "--data", dirC}
	if code, _, stderr := runExport(t, "--data", dirA, "--data", dirA+"/", "--format", "jsonl", "--out", filepath.Join(base, "x.jsonl")); code != exitUsage || !strings.Contains(stderr, "are the same store") {
		t.Errorf("one store twice: exit %d, %q", code, stderr)
	}

	t.Run("jsonl", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "all.jsonl")
		code, _, stderr := runExport(t, append(datas, "--format", "jsonl", "--out", out, "--no-body")...)
		if code != exitOK {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		if !strings.Contains(stderr, "crawl export: "+strconv.Itoa(pages)+" pages written (0 filtered out, "+strconv.Itoa(superseded)+" fetches of URLs another store fetched later)") {
			t.Errorf("summary %q: want %d pages, %d superseded", stderr, pages, superseded)
		}
		got := map[string][]time.Time{}
		for _, line := range readLines(t, out) {
			var rec struct {
				URL       string    `json:"url"`
				FetchedAt time.Time `json:"fetched_at"`
			}
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Fatal(err)
			}
			got[rec.URL] = append(got[rec.URL], rec.FetchedAt)
		}
		checkMerged(t, got, want)
	})

	t.Run("warc", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "all.warc.gz")
		code, _, stderr := runExport(t, append(datas, "--format", "warc", "--out", out)...)
		if code != exitOK {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		got := map[string][]time.Time{}
		robots := map[string]int{}
		responseDates := map[string]bool{} // URI and date of every response record
		var refers []string                // URI and WARC-Refers-To-Date of every revisit
		eachWARCRecord(t, out, func(rec gowarc.WarcRecord) {
			h := rec.WarcHeader()
			uri, date := h.Get(gowarc.WarcTargetURI), h.Get(gowarc.WarcDate)
			if rec.Type() != gowarc.Response && rec.Type() != gowarc.Revisit {
				return
			}
			if strings.HasSuffix(uri, "/robots.txt") {
				robots[uri]++
				return
			}
			at, err := time.Parse(time.RFC3339Nano, date)
			if err != nil {
				t.Fatal(err)
			}
			got[uri] = append(got[uri], at)
			if rec.Type() == gowarc.Response {
				responseDates[uri+" "+date] = true
			} else {
				refers = append(refers, uri+" "+h.Get(gowarc.WarcRefersToDate))
			}
		})
		checkMerged(t, got, want)
		if len(refers) == 0 {
			t.Fatal("no revisit record: B's recrawl got no 304")
		}
		for _, ref := range refers {
			if !responseDates[ref] {
				t.Errorf("revisit refers to %q, which is no response record of the export", ref)
			}
		}
		for uri, n := range robots {
			if n != 1 {
				t.Errorf("%s: %d robots.txt records, want the latest fetch's only", uri, n)
			}
		}
		if len(robots) != 2 {
			t.Errorf("robots.txt records for %v, want both hosts", robots)
		}
	})

	t.Run("mirror", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "mirror")
		code, _, stderr := runExport(t, append(datas, "--format", "mirror", "--out", out)...)
		if code != exitOK {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		// Host a's pages are plain 200s: each file's time is the latest fetch of its URL,
		// C's for the pages C fetched again, A's for the others.
		checked := 0
		for u, ts := range want {
			if !strings.HasPrefix(u, web.URL("a")) {
				continue
			}
			rel := filepath.Join(export.MirrorPath(u)...)
			if !strings.HasSuffix(u, "/") { // MirrorPath names a root index.html itself
				rel += ".html"
			}
			fi, err := os.Stat(filepath.Join(out, rel))
			if err != nil {
				t.Errorf("%s: %v", u, err)
				continue
			}
			if !fi.ModTime().Truncate(time.Microsecond).Equal(ts[len(ts)-1]) {
				t.Errorf("%s: file time %v, want the latest fetch %v", u, fi.ModTime().UTC(), ts[len(ts)-1])
			}
			checked++
		}
		if checked < 10 {
			t.Errorf("checked %d of a's files", checked)
		}
	})
}

// checkMerged compares an export's fetch times by URL with want.
func checkMerged(t *testing.T, got, want map[string][]time.Time) {
	t.Helper()
	for u, ts := range want {
		g := got[u]
		if len(g) != len(ts) {
			t.Errorf("%s: %d records %v, want %d %v", u, len(g), g, len(ts), ts)
			continue
		}
		for i := range g {
			if !g[i].Equal(ts[i]) {
				t.Errorf("%s: fetched at %v, want %v (the latest store's)", u, g, ts)
				break
			}
		}
	}
	for u := range got {
		if _, ok := want[u]; !ok {
			t.Errorf("%s exported but in no store", u)
		}
	}
}
