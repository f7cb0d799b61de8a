package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crawl-project/crawl/internal/simweb"
	"github.com/crawl-project/crawl/internal/storetest"
	"github.com/crawl-project/crawl/storage"
	"go.etcd.io/bbolt"
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

	// One leaf damaged, wherever it lies: which bucket the middle leaf belongs to depends on how
	// the crawl's commits were batched, so the leaves of the frontier's URL records and of the
	// pages are damaged on purpose too.
	for _, tc := range []struct {
		name, bucket string // bucket "": any
	}{{"one leaf", ""}, {"one leaf of the URL records", "frontier/records"}, {"one leaf of the pages", "pages"}} {
		t.Run(tc.name, func(t *testing.T) {
			dir, path := copyStore(t)
			if n := storetest.MustDamageLeavesOf(t, path, tc.bucket, func(i, n int) bool { return i == n/2 }); n != 1 {
				t.Fatalf("damaged %d pages, want 1", n)
			}
			code, out := crawl("check", "--data", dir)
			if code != exitRuntime || !strings.Contains(out, "damaged") || !strings.Contains(out, "crawl salvage") {
				t.Errorf("crawl check: exit %d; want %d listing the damage and naming crawl salvage:\n%s", code, exitRuntime, out)
			}
			to := filepath.Join(t.TempDir(), "salvaged")
			code, out = crawl("salvage", "--data", dir, "--to", to)
			if code != exitOK || !strings.Contains(out, "passed over") || !strings.Contains(out, "resumes the crawl") {
				t.Fatalf("crawl salvage: exit %d; want %d, saying what was passed over and that the crawl resumes\n%s", code, exitOK, out)
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
}

// TestSalvageNothingQueued: crawl salvage of a crawl that has nothing left to fetch does not
// say that crawl run resumes it; it says what the store holds and how to queue URLs again.
func TestSalvageNothingQueued(t *testing.T) {
	web, err := simweb.Start([]simweb.HostSpec{{Name: "a", Pages: 10}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	dir := crawlSite(t, web)
	to := filepath.Join(t.TempDir(), "salvaged")
	var out, errb strings.Builder
	if code := salvageCmd([]string{"--data", dir, "--to", to}, &out, &errb); code != exitOK {
		t.Fatalf("crawl salvage: exit %d\n%s%s", code, out.String(), errb.String())
	}
	if s := out.String(); strings.Contains(s, "resumes the crawl") || !strings.Contains(s, "no URL is left queued (10 fetched") ||
		!strings.Contains(s, "crawl run --data "+to+" URL…") {
		t.Errorf("crawl salvage of a finished crawl says:\n%s\nwant that no URL is left queued, what it holds and how to queue URLs again", s)
	}
}

// TestStoredSettingsDamaged: a settings record that decodes but holds settings no crawl could
// have run with (a changed digit: --max-rate 0) makes crawl run say the store is damaged,
// naming its file (exit 1), not blame the command line; a flag given on the command line that
// makes the settings invalid is still a usage error.
func TestStoredSettingsDamaged(t *testing.T) {
	web, err := simweb.Start([]simweb.HostSpec{{Name: "a", Pages: 10}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	dir := crawlSite(t, web, "--max-rate", "30")
	db, err := storage.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := db.Meta("settings")
	if err != nil || !bytes.Contains(b, []byte(`"max_rate":30`)) {
		db.Close()
		t.Fatalf("settings record %s (%v); want a max_rate of 30 in it", b, err)
	}
	if err := db.PutMeta("settings", bytes.Replace(b, []byte(`"max_rate":30`), []byte(`"max_rate":0`), 1)); err != nil {
		t.Fatal(err)
	}
	db.Close()
	var out, errb strings.Builder
	code := runCmd([]string{"--data", dir, "--quiet"}, &out, &errb)
	if path := filepath.Join(dir, storage.FileName); code != exitRuntime || !strings.Contains(errb.String(), path) || !strings.Contains(errb.String(), "damaged") {
		t.Errorf("crawl run on stored settings with --max-rate 0: exit %d; want %d naming %s as damaged\n%s", code, exitRuntime, path, errb.String())
	}
	errb.Reset()
	if code := runCmd([]string{"--data", dir, "--quiet", "--max-rate", "0.01"}, &out, &errb); code != exitUsage {
		t.Errorf("crawl run --max-rate 0.01 (below --min-rate): exit %d; want %d\n%s", code, exitUsage, errb.String())
	}
	out.Reset()
	if code := checkCmd([]string{"--data", dir}, &out, &errb); code != exitRuntime || !strings.Contains(out.String(), "stored settings make no valid crawl") {
		t.Errorf("crawl check: exit %d; want %d saying the stored settings are damaged\n%s", code, exitRuntime, out.String())
	}
	to := filepath.Join(t.TempDir(), "salvaged")
	out.Reset()
	if code := salvageCmd([]string{"--data", dir, "--to", to}, &out, &errb); code != exitOK || !strings.Contains(out.String(), "were dropped") {
		t.Fatalf("crawl salvage: exit %d; want %d, dropping the stored settings\n%s%s", code, exitOK, out.String(), errb.String())
	}
	if code := checkCmd([]string{"--data", to}, &out, &errb); code != exitOK {
		t.Errorf("crawl check of the salvaged store: exit %d\n%s", code, out.String())
	}
}

// TestInconsistentFrontierDamaged: a store whose frontier's records contradict each other (a
// host's counters record cut short, as damage leaves it) makes crawl run say the store is
// damaged, naming its file (exit 1), not tell the operator to free disk space.
func TestInconsistentFrontierDamaged(t *testing.T) {
	web, err := simweb.Start([]simweb.HostSpec{{Name: "a", Pages: 60}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	dir := crawlSite(t, web, "--max-pages", "5")
	db, err := storage.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	cut := 0
	if err := db.Update(func(tx *bbolt.Tx) error {
		hosts := tx.Bucket([]byte("frontier/hosts"))
		var keys [][]byte
		hosts.ForEach(func(k, v []byte) error {
			if v != nil && len(v) > 2 {
				keys = append(keys, bytes.Clone(k))
			}
			return nil
		})
		for _, k := range keys {
			if err := hosts.Put(k, bytes.Clone(hosts.Get(k)[:2])); err != nil {
				return err
			}
			cut++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if cut == 0 {
		t.Fatal("no host record to cut")
	}
	var out, errb strings.Builder
	code := runCmd([]string{"--data", dir, "--quiet", "--max-pages", "60"}, &out, &errb)
	if path := filepath.Join(dir, storage.FileName); code != exitRuntime || !strings.Contains(errb.String(), path) || !strings.Contains(errb.String(), "damaged") || strings.Contains(errb.String(), "disk space") {
		t.Errorf("crawl run on a store whose host records are cut short: exit %d; want %d naming %s as damaged\n%s", code, exitRuntime, path, errb.String())
	}
}
