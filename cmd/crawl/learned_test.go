package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crawl-project/crawl/internal/simweb"
	"github.com/crawl-project/crawl/storage"
)

// TestExportLearnedCarriesPoliteness: crawl export --format learned writes each host's learned
// state, --host keeps some, and crawl run --learned-from FILE starts a new crawl of the site
// from it; a malformed file is refused naming its line.
func TestExportLearnedCarriesPoliteness(t *testing.T) {
	web, err := simweb.Start([]simweb.HostSpec{{Name: "a", Pages: 20}, {Name: "b", Pages: 5}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	dir := crawlSite(t, web)
	file := filepath.Join(t.TempDir(), "learned.jsonl")
	var out, errb bytes.Buffer
	if code := exportCmd([]string{"--data", dir, "--format", "learned", "--out", file}, &out, &errb); code != exitOK {
		t.Fatalf("crawl export --format learned: exit %d\n%s", code, errb.String())
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2 || !strings.Contains(errb.String(), "2 hosts") {
		t.Fatalf("want a line per host (2):\n%s\n%s", b, errb.String())
	}
	host := strings.TrimPrefix(web.Seeds()[0], "http://")
	host = strings.TrimSuffix(host, "/")
	out.Reset()
	if code := exportCmd([]string{"--data", dir, "--format", "learned", "--out", "-", "--host", host}, &out, &errb); code != exitOK || strings.Count(out.String(), "\n") != 1 || !strings.Contains(out.String(), host) {
		t.Fatalf("--host %s: exit %d, want its one line:\n%s", host, code, out.String())
	}

	fresh := filepath.Join(t.TempDir(), "fresh")
	errb.Reset()
	args := []string{"--seeds", writeSeeds(t, web.Seeds()), "--data", fresh, "--quiet", "--learned-from", file}
	if code := runCmd(args, &out, &errb); code != exitOK {
		t.Fatalf("crawl run --learned-from FILE: exit %d\n%s", code, errb.String())
	}
	db, err := storage.Open(fresh, &storage.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	db.HostStates(func(string, []byte) error { n++; return nil })
	db.Close()
	if n != 2 {
		t.Errorf("the new crawl saved %d host states, want 2", n)
	}

	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	os.WriteFile(bad, []byte(lines[0]+"\n{\"host\": 1}\n"), 0o644)
	errb.Reset()
	args = []string{"--seeds", writeSeeds(t, web.Seeds()), "--data", filepath.Join(t.TempDir(), "x"), "--quiet", "--learned-from", bad}
	if code := runCmd(args, &out, &errb); code != exitUsage || !strings.Contains(errb.String(), bad+":2:") {
		t.Errorf("--learned-from a malformed file: exit %d, want %d naming %s:2\n%s", code, exitUsage, bad, errb.String())
	}
}

// TestLearnedFromHostileFile: a learned-politeness file whose state for the site pauses it to
// year 9999, caps it at 1e-300 req/s and gives rates of 1e-300 does not slow the crawl: crawl
// run --learned-from FILE fetches the whole site and is not deferred, the store keeps no pause
// or ceiling from the file, and the next run on that store without the flag fetches a new seed
// of the site.
func TestLearnedFromHostileFile(t *testing.T) {
	t.Parallel()
	web, err := simweb.Start([]simweb.HostSpec{{Name: "a", Pages: 20}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	host := strings.TrimSuffix(strings.TrimPrefix(web.Seeds()[0], "http://"), "/")
	hostile := filepath.Join(t.TempDir(), "learned.jsonl")
	state := `{"aimd":{"version":2,"rate":1e-300,"window":-3,"plateau":1e-300,"fail_cut":1e-300,"refusal_cut":1e-300},"paused_until":"9999-12-31T23:59:59Z","ceiling":1e-300,"saved_at":"9999-12-31T23:59:59Z"}`
	if err := os.WriteFile(hostile, []byte(`{"host":"`+host+`","state":`+state+"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "data")
	pages := func() int {
		t.Helper()
		db, err := storage.Open(dir, &storage.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		n := 0
		if err := db.PagesMeta(func(*storage.Page) error { n++; return nil }); err != nil {
			t.Fatal(err)
		}
		b, ok, err := db.LoadHostState(host)
		if err != nil || !ok {
			t.Fatalf("no saved state for %s: %v", host, err)
		}
		var saved struct {
			AIMD        struct{ Rate float64 }
			PausedUntil time.Time `json:"paused_until"`
			Ceiling     float64
		}
		if err := json.Unmarshal(b, &saved); err != nil {
			t.Fatal(err)
		}
		if saved.PausedUntil.After(time.Now().Add(time.Hour)) || saved.Ceiling != 0 || saved.AIMD.Rate < 0.1 {
			t.Errorf("the store kept what the file brought: %s", b)
		}
		return n
	}

	var out, errb bytes.Buffer
	start := time.Now()
	args := []string{"--seeds", writeSeeds(t, web.Seeds()), "--data", dir, "--quiet", "--learned-from", hostile}
	if code := runCmd(args, &out, &errb); code != exitOK || strings.Contains(errb.String(), "deferred") {
		t.Fatalf("crawl run --learned-from a hostile file: exit %d\n%s", code, errb.String())
	}
	if n := pages(); n != 20 {
		t.Fatalf("%d pages fetched of 20 (%.1fs)\n%s", n, time.Since(start).Seconds(), errb.String())
	}

	errb.Reset()
	args = []string{"--seeds", writeSeeds(t, []string{web.Seeds()[0] + "not-linked"}), "--data", dir, "--quiet"}
	if code := runCmd(args, &out, &errb); code != exitOK || strings.Contains(errb.String(), "deferred") {
		t.Fatalf("the next run, without --learned-from: exit %d\n%s", code, errb.String())
	}
	if n := pages(); n != 21 {
		t.Fatalf("the next run: %d pages stored, want 21\n%s", n, errb.String())
	}
}
