package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crawl-project/crawl/internal/simweb"
	"github.com/crawl-project/crawl/internal/storetest"
)

// TestDamagedStore: a store with bytes flipped in its pages makes crawl run, crawl urls and
// crawl status exit 1 with a message naming the file and saying it is damaged, never a stack
// trace; crawl check lists the damage; crawl salvage copies what is readable into a store that
// passes crawl check (its frontier repaired), opens and exports.
func TestDamagedStore(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns crawl processes")
	}
	web, err := simweb.Start([]simweb.HostSpec{{Name: "a", Pages: 150}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	good := crawlSite(t, web, "--max-pages", "120")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	crawl := func(args ...string) (int, string) {
		cmd, out := crawlProcess(ctx, args...)
		cmd.Run()
		return cmd.ProcessState.ExitCode(), out.String()
	}

	copyStore := func(t *testing.T) (string, string) {
		dir := t.TempDir()
		b, err := os.ReadFile(filepath.Join(good, "crawl.db"))
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "crawl.db")
		os.WriteFile(path, b, 0o644)
		return dir, path
	}

	t.Run("every leaf", func(t *testing.T) {
		dir, path := copyStore(t)
		if n := storetest.MustDamageLeaves(t, path, func(int, int) bool { return true }); n < 3 {
			t.Fatalf("damaged %d pages; the store is too small to test", n)
		}
		for _, args := range [][]string{{"run", "--data", dir, "--max-pages", "150"}, {"urls", "--data", dir}, {"status", "--data", dir}, {"check", "--data", dir},
			{"export", "--data", dir, "--format", "warc", "--out", filepath.Join(t.TempDir(), "x.warc.gz")}} {
			code, out := crawl(args...)
			if code != exitRuntime || !strings.Contains(out, path) || !strings.Contains(out, "damaged") || strings.Contains(out, "goroutine ") {
				t.Errorf("crawl %s: exit %d; want %d, a message naming %s as damaged and no stack trace:\n%s", args[0], code, exitRuntime, path, out)
			}
		}
	})

	t.Run("one leaf", func(t *testing.T) {
		dir, path := copyStore(t)
		if n := storetest.MustDamageLeaves(t, path, func(i, n int) bool { return i == n/2 }); n != 1 {
			t.Fatalf("damaged %d pages, want 1", n)
		}
		code, out := crawl("check", "--data", dir)
		if code != exitRuntime || !strings.Contains(out, "damaged") || !strings.Contains(out, "crawl salvage") {
			t.Errorf("crawl check: exit %d; want %d listing the damage and naming crawl salvage:\n%s", code, exitRuntime, out)
		}
		to := filepath.Join(t.TempDir(), "salvaged")
		code, out = crawl("salvage", "--data", dir, "--to", to)
		if code != exitOK || !strings.Contains(out, "passed over") {
			t.Fatalf("crawl salvage: exit %d\n%s", code, out)
		}
		t.Log(out)
		for _, args := range [][]string{{"check", "--data", to}, {"status", "--data", to}, {"export", "--data", to, "--format", "jsonl", "--out", filepath.Join(t.TempDir(), "x.jsonl")}} {
			if code, out := crawl(args...); code != exitOK {
				t.Errorf("crawl %s on the salvaged store: exit %d\n%s", args[0], code, out)
			}
		}
		// The salvaged crawl resumes: what lost its page is fetched again, and it ends complete.
		if code, out := crawl("run", "--data", to, "--quiet", "--max-pages", "150"); code != exitOK {
			t.Fatalf("crawl run on the salvaged store: exit %d\n%s", code, out)
		}
		pages, c := inspectStore(t, to, "after resuming the salvaged crawl")
		if c.Queued != 0 || len(pages) != 150 {
			t.Errorf("after resuming: %d pages stored, counts %+v; want the site's 150 and nothing queued", len(pages), c)
		}
	})
}
