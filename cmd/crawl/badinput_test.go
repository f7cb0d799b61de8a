package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/crawl-project/crawl/frontier"
	"github.com/crawl-project/crawl/internal/crawler"
	"github.com/crawl-project/crawl/internal/simweb"
	"github.com/crawl-project/crawl/storage"
	"go.etcd.io/bbolt"
)

// tinySite serves one page with no links (and no robots.txt): a crawl of it takes a moment.
func tinySite(t *testing.T) string {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("<title>tiny</title><p>nothing to follow</p>"))
	}))
	t.Cleanup(s.Close)
	return s.URL
}

func writeFile(t *testing.T, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestBadSeedFiles: bad lines are reported as FILE:LINE and skipped, the good lines are crawled
// once each; a file with nothing usable, or a binary one, is a usage error (exit 2) that
// creates nothing.
func TestBadSeedFiles(t *testing.T) {
	t.Parallel()
	site := tinySite(t)
	random := make([]byte, 1<<20)
	rand.New(rand.NewSource(7)).Read(random)
	var log strings.Builder
	for i := 0; i < 3000; i++ {
		fmt.Fprintf(&log, "2025-01-01T00:00:%02d GET /x/%d 200\n", i%60, i)
	}
	log.WriteString(site + "\n")
	tests := []struct {
		name    string
		content string
		code    int
		stderr  []string // substrings
		fetched int      // with exit 0: pages stored
		check   func(t *testing.T, dir, stderr string)
	}{
		{
			name: "bad lines, duplicates, BOM and CRLF",
			content: "\ufeff# seeds\r\n" + site + "\r\nmailto:a@b.example\r\nftp://files.example/x\r\nnot a url\r\nhttp:///nohost\r\n" +
				strings.ToUpper(site[:4]) + site[4:] + "/#top\r\n" + site + "/./\r\n" + strings.Repeat("y", 100<<10) + "\r\n" +
				site + "/" + strings.Repeat("p", 3000) + "\r\n",
			stderr:  []string{"seeds.txt:3:", "seeds.txt:4:", "seeds.txt:5:", "seeds.txt:6:", "seeds.txt:9: line longer than", "seeds.txt:10:", "too long", "(skipped)"},
			fetched: 1,
		},
		{
			name:    "IDN seed, normalized to punycode",
			content: site + "\nhttp://bücher.example/\n",
			fetched: 1,
			check: func(t *testing.T, dir, _ string) {
				st := urlState(t, dir, "http://xn--bcher-kva.example/")
				if st.State != "excluded" || st.Reason != "filter" {
					t.Errorf("IDN seed: %+v, want excluded by the --exclude filter under its punycode URL", st)
				}
			},
		},
		{
			name:    "a log file with one URL in it",
			content: log.String(),
			fetched: 1,
			stderr:  []string{"seeds.txt:1:", "and 2900 more bad lines, not listed"},
			check: func(t *testing.T, _, stderr string) {
				if n := strings.Count(stderr, "\n"); n > 110 {
					t.Errorf("%d lines on stderr for a 3000-line log; want it bounded", n)
				}
			},
		},
		{name: "binary file", content: string(random), code: exitUsage, stderr: []string{"seeds.txt: binary data, not a list of URLs"}},
		{name: "only bad lines", content: "mailto:x@y\n\x01\x02\njavascript:void(0)\n", code: exitUsage, stderr: []string{"seeds.txt:1:", "seeds.txt:2:", "seeds.txt:3:", "no valid seed URL"}},
		{name: "empty", content: "", code: exitUsage, stderr: []string{"no valid seed URL"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seeds := writeFile(t, "seeds.txt", []byte(tt.content))
			dir := filepath.Join(t.TempDir(), "data")
			var out, errb bytes.Buffer
			code := runCmd([]string{"--seeds", seeds, "--data", dir, "--quiet", "--exclude", "xn--"}, &out, &errb)
			if code != tt.code {
				t.Fatalf("exit %d, want %d\n%s%s", code, tt.code, errb.String(), out.String())
			}
			for _, s := range tt.stderr {
				if !strings.Contains(errb.String(), s) {
					t.Errorf("stderr lacks %q:\n%s", s, errb.String())
				}
			}
			if code != exitOK {
				if _, err := os.Stat(dir); !os.IsNotExist(err) {
					t.Errorf("a usage error created %s (%v)", dir, err)
				}
				return
			}
			pages, counts := inspectStore(t, dir, "after the crawl")
			if len(pages) != tt.fetched || counts.Fetched != tt.fetched {
				t.Errorf("stored %v (%d fetched), want %d page", pages, counts.Fetched, tt.fetched)
			}
			if tt.check != nil {
				tt.check(t, dir, errb.String())
			}
		})
	}

	t.Run("seed file is a directory", func(t *testing.T) {
		var out, errb bytes.Buffer
		if code := runCmd([]string{"--seeds", t.TempDir(), "--data", filepath.Join(t.TempDir(), "d")}, &out, &errb); code != exitUsage || !strings.Contains(errb.String(), "is a directory") {
			t.Errorf("exit %d, want %d with 'is a directory':\n%s", code, exitUsage, errb.String())
		}
	})
}

func urlState(t *testing.T, dir, u string) frontier.URLState {
	t.Helper()
	db, err := storage.Open(dir, &storage.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	fr, err := frontier.Open(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, ok, err := fr.State(u)
	if err != nil || !ok {
		t.Fatalf("%s: not recorded (%v)", u, err)
	}
	return st
}

// TestInvalidFlags: impossible or conflicting flags are usage errors (exit 2) with a message
// naming the flag, and touch nothing: no data directory is created, an existing store is left
// as it was and still resumes.
func TestInvalidFlags(t *testing.T) {
	site := tinySite(t)
	seeds := writeFile(t, "seeds.txt", []byte(site+"\n"))
	store := filepath.Join(t.TempDir(), "store")
	var out, errb bytes.Buffer
	if code := runCmd([]string{"--seeds", seeds, "--data", store, "--quiet"}, &out, &errb); code != exitOK {
		t.Fatalf("setting up a store: exit %d\n%s", code, errb.String())
	}
	empty := filepath.Join(t.TempDir(), "empty")
	if db, err := storage.Open(empty, nil); err != nil { // a store that never got a seed
		t.Fatal(err)
	} else {
		db.Close()
	}
	tests := []struct {
		name string
		args []string // --data NEW is added unless --data is given
		want string
	}{
		{"zero workers", []string{"--workers", "0"}, "--workers must be between 1 and"},
		{"absurd workers", []string{"--workers", "9223372036854775807"}, "--workers must be between 1 and"},
		{"workers overflow int", []string{"--workers", "99999999999999999999"}, `--workers "99999999999999999999": out of range: want a whole number`},
		{"zero host concurrency", []string{"--host-concurrency", "0"}, "--host-concurrency must be between"},
		{"depth below -1", []string{"--max-depth", "-2"}, "--max-depth must be -1"},
		{"negative host pages", []string{"--max-host-pages", "-1"}, "--max-host-pages must not be negative"},
		{"negative max pages", []string{"--max-pages", "-5"}, "--max-pages must not be negative"},
		{"NaN rate", []string{"--initial-rate", "NaN"}, "--initial-rate must be a finite number"},
		{"infinite max rate", []string{"--max-rate", "+Inf"}, "--max-rate must be a finite number"},
		{"negative min rate", []string{"--min-rate", "-1"}, "--min-rate must be positive"},
		{"min above max", []string{"--min-rate", "10", "--max-rate", "5"}, "--max-rate (5) must not be below --min-rate (10)"},
		{"zero timeout", []string{"--timeout", "0s"}, "--timeout must be positive"},
		{"negative timeout", []string{"--timeout", "-1s"}, "--timeout must be positive"},
		{"timeout not a duration", []string{"--timeout", "soon"}, `--timeout "soon": want a duration such as 30s, 5m or 1h30m (a bare number is seconds)`},
		{"zero max body", []string{"--max-body", "0"}, `--max-body "0": want a positive number of bytes`},
		{"max body unit unknown", []string{"--max-body", "10XB"}, `--max-body "10XB": want a positive number of bytes, e.g. 10485760, 10M or 10MB`},
		{"bad robots agent", []string{"--robots-agent", "My Bot/1"}, "--robots-agent must be a product token"},
		{"zero attempts", []string{"--max-attempts", "0"}, "--max-attempts must be at least 1"},
		{"negative robots ttl", []string{"--robots-ttl", "-1h"}, "--robots-ttl must be at least 1m0s"},
		{"zero robots ttl", []string{"--robots-ttl", "0"}, "--robots-ttl must be at least 1m0s"},
		{"robots ttl below the floor", []string{"--robots-ttl", "30s"}, "--robots-ttl must be at least 1m0s"},
		{"empty user agent", []string{"--user-agent", ""}, "--user-agent must not be empty"},
		{"user agent with a newline", []string{"--user-agent", "bot/1\r\nX-Evil: 1"}, "--user-agent must not contain control characters"},
		{"bad scope", []string{"--scope", "planet"}, "--scope must be host or domain"},
		{"bad include", []string{"--include", "a(b"}, "missing closing )"},
		{"unknown flag", []string{"--frobnicate"}, "crawl run: unknown flag --frobnicate (crawl help run lists the flags)"},
		{"nothing to resume", []string{"--data", empty}, "holds no URL to resume"},
		{"learned from nowhere", []string{"--learned-from", filepath.Join(empty, "missing")}, "missing: want the data directory of another crawl"},
		{"learned from no store", []string{"--learned-from", t.TempDir()}, "no crawl store there (crawl.db)"},
	}
	before := fileHash(t, filepath.Join(store, "crawl.db"))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"--quiet"}, tt.args...)
			fresh := filepath.Join(t.TempDir(), "new")
			if !strings.Contains(strings.Join(tt.args, " "), "--data") {
				args = append(args, "--data", fresh, "--seeds", seeds)
			}
			var out, errb bytes.Buffer
			if code := runCmd(args, &out, &errb); code != exitUsage {
				t.Errorf("exit %d, want %d\n%s", code, exitUsage, errb.String())
			}
			if !strings.Contains(errb.String(), tt.want) {
				t.Errorf("stderr lacks %q:\n%s", tt.want, errb.String())
			}
			if _, err := os.Stat(fresh); !os.IsNotExist(err) {
				t.Errorf("a usage error created %s", fresh)
			}
		})
	}
	// The store the conflicting run was pointed at is intact and resumes.
	pages, _ := inspectStore(t, store, "after the usage errors")
	if len(pages) != 1 {
		t.Errorf("store holds %d pages, want 1", len(pages))
	}
	if fileHash(t, filepath.Join(store, "crawl.db")) != before {
		t.Logf("note: the store file was rewritten (bbolt commits a meta page) but its content checks out")
	}
	if code := runCmd([]string{"--data", store, "--quiet"}, &out, &errb); code != exitOK {
		t.Errorf("resume after the usage errors: exit %d\n%s", code, errb.String())
	}
}

func fileHash(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

// TestDataDirNotAStore: `crawl run` (with and without --seeds) and `crawl status` on a --data
// that is not a crawl store fail at once with a message saying so (a crawl store cut short: that
// it is damaged), and leave what is there untouched.
func TestDataDirNotAStore(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns crawl processes")
	}
	site := tinySite(t)
	seeds := writeFile(t, "seeds.txt", []byte(site+"\n"))
	random := make([]byte, 16<<10)
	rand.New(rand.NewSource(3)).Read(random)

	// A real store of a few hundred pages, to be cut in half (a copy that ran out of space).
	web, err := simweb.Start([]simweb.HostSpec{{Name: "a", Pages: 300}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	full := filepath.Join(t.TempDir(), "full")
	var out, errb bytes.Buffer
	code := runCmd([]string{"--seeds", writeSeeds(t, web.Seeds()), "--data", full, "--quiet", "--initial-rate", "1000"}, &out, &errb)
	web.Close()
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, errb.String())
	}
	whole, err := os.ReadFile(filepath.Join(full, "crawl.db"))
	if err != nil {
		t.Fatal(err)
	}

	type outcome struct {
		code int
		want string
	}
	notStore := outcome{exitRuntime, "not a crawl store"}
	damaged := outcome{exitRuntime, "is damaged"} // a crawl store, cut short
	storeFile := outcome{exitUsage, "is the store file; --data names the directory that holds it"}
	tests := []struct {
		name                string
		setup               func(t *testing.T, dir string) string // returns the --data path
		run, resume, status outcome
	}{
		{"garbage crawl.db", func(t *testing.T, dir string) string {
			os.WriteFile(filepath.Join(dir, "crawl.db"), random, 0o644)
			return dir
		}, notStore, notStore, notStore},
		{"another program's bbolt file", func(t *testing.T, dir string) string {
			db, err := bbolt.Open(filepath.Join(dir, "crawl.db"), 0o644, nil)
			if err != nil {
				t.Fatal(err)
			}
			db.Update(func(tx *bbolt.Tx) error {
				b, _ := tx.CreateBucket([]byte("invoices"))
				return b.Put([]byte("2025-001"), []byte("paid"))
			})
			db.Close()
			return dir
		}, notStore, notStore, notStore},
		{"store cut in half", func(t *testing.T, dir string) string {
			os.WriteFile(filepath.Join(dir, "crawl.db"), whole[:len(whole)/2], 0o644)
			return dir
		}, damaged, damaged, damaged},
		{"crawl.db is a directory", func(t *testing.T, dir string) string {
			os.Mkdir(filepath.Join(dir, "crawl.db"), 0o755)
			return dir
		}, notStore, notStore, notStore},
		{"--data is a file", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "notes.txt")
			os.WriteFile(p, []byte("my notes\n"), 0o644)
			return p
		}, outcome{exitUsage, "is a file; --data names a crawl's data directory"}, outcome{exitUsage, "is a file; --data names a crawl's data directory"},
			outcome{exitUsage, "is a file; --data names a crawl's data directory"}},
		{"--data names the store file", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "crawl.db")
			os.WriteFile(p, whole, 0o644)
			return p
		}, storeFile, storeFile, storeFile},
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := tt.setup(t, t.TempDir())
			before := snapshotTree(t, data)
			for _, c := range []struct {
				args []string
				want outcome
			}{
				{[]string{"run", "--data", data, "--seeds", seeds, "--quiet"}, tt.run},
				{[]string{"run", "--data", data, "--quiet"}, tt.resume},
				{[]string{"status", "--data", data}, tt.status},
			} {
				start := time.Now()
				code, msg := crawlOutput(t, ctx, c.args...)
				if code != c.want.code || !strings.Contains(msg, c.want.want) {
					t.Errorf("crawl %s: exit %d, want %d with %q:\n%s", strings.Join(c.args, " "), code, c.want.code, c.want.want, msg)
				}
				if d := time.Since(start); d > 10*time.Second {
					t.Errorf("crawl %s took %v to give up", c.args[0], d)
				}
			}
			if after := snapshotTree(t, data); after != before {
				t.Errorf("what was in --data changed:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

// snapshotTree describes path (a file, or a directory and its direct entries) with content
// hashes.
func snapshotTree(t *testing.T, path string) string {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		return "missing"
	}
	if !fi.IsDir() {
		return fmt.Sprintf("file %x", fileHash(t, path))
	}
	ents, _ := os.ReadDir(path)
	var b strings.Builder
	for _, e := range ents {
		if e.IsDir() {
			fmt.Fprintf(&b, "%s/ ", e.Name())
		} else {
			fmt.Fprintf(&b, "%s=%x ", e.Name(), fileHash(t, filepath.Join(path, e.Name())))
		}
	}
	return b.String()
}

// TestDataDirLocked: while one crawl runs, a second `crawl run` on the same --data fails at
// once with a clear message, `crawl status` reports the running crawl, and the first crawl,
// interrupted and resumed, still ends with every page stored exactly once.
func TestDataDirLocked(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns crawl processes")
	}
	web, err := simweb.Start(killWeb(), &simweb.Options{Seed: 11})
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	seeds := writeSeeds(t, web.Seeds())
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	first, out := crawlProcess(ctx, "run", "--seeds", seeds, "--data", dir, "--quiet", "--max-rate", "10")
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	defer first.Process.Kill()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(dir, "status.json")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the first crawl never wrote status.json:\n%s", out)
		}
		time.Sleep(20 * time.Millisecond)
	}

	for _, args := range [][]string{
		{"run", "--data", dir, "--quiet"},
		{"run", "--data", dir, "--seeds", seeds, "--quiet"},
	} {
		start := time.Now()
		code, msg := crawlOutput(t, ctx, args...)
		holder := fmt.Sprintf("in use by another crawl (held by process %d;", first.Process.Pid)
		if code != exitRuntime || !strings.Contains(msg, holder) {
			t.Errorf("second crawl %v: exit %d, want %d with %q:\n%s", args[3:], code, exitRuntime, holder, msg)
		}
		checkNoPackageNames(t, msg)
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("second crawl took %v to give up", d)
		}
	}
	code, msg := crawlOutput(t, ctx, "status", "--data", dir, "--json")
	var st crawler.Status
	if err := json.Unmarshal([]byte(msg), &st); code != exitOK || err != nil || !st.Running {
		t.Errorf("status while running: exit %d, %v, running %v:\n%s", code, err, st.Running, msg)
	}

	first.Process.Signal(syscall.SIGINT)
	if err := first.Wait(); first.ProcessState.ExitCode() != exitInterrupted {
		t.Fatalf("first crawl after SIGINT: %v\n%s", err, out)
	}
	if code, msg := crawlOutput(t, ctx, "run", "--data", dir, "--quiet"); code != exitOK {
		t.Fatalf("resume: exit %d\n%s", code, msg)
	}
	pages, _ := inspectStore(t, dir, "after the resume")
	checkEachOnce(t, web, pages)
}
