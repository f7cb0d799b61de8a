package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nlnwa/gowarc"
	"go.etcd.io/bbolt"

	"github.com/crawl-project/crawl/storage"
)

var exportT0 = time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)

// newExportStore builds a real store in a temporary directory with pages on two hosts: 200s, a
// redirect, a 404 and a binary body. It returns the directory, closed.
func newExportStore(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	db, err := storage.Open(dir, &storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	page := func(u string, status int, ct string, body string, at time.Duration) *storage.Page {
		h := http.Header{}
		if ct != "" {
			h.Set("Content-Type", ct)
		}
		return &storage.Page{
			URL: u, FinalURL: u, Status: status, Proto: "HTTP/1.1",
			StatusLine: fmt.Sprintf("HTTP/1.1 %d %s", status, http.StatusText(status)),
			Header:     h, ReqHeader: http.Header{"User-Agent": {"crawl-test"}}, ReqMethod: "GET",
			FetchedAt: exportT0.Add(at), Duration: 5 * time.Millisecond, ContentType: ct,
			RemoteAddr: "127.0.0.1:80", Body: []byte(body),
		}
	}
	pages := []*storage.Page{
		page("http://a.example/", 200, "text/html", "<a href=/x>x</a>", 0),
		page("http://a.example/x", 301, "", "", time.Minute),
		page("http://a.example/y", 404, "text/plain", "nope", 2*time.Minute),
		page("http://b.example:8080/img", 200, "image/png", "\x89PNG\r\n\x1a\n\x00\x01", 3*time.Minute),
		page("http://b.example:8080/z/", 200, "text/plain", "zzz", 4*time.Minute),
	}
	pages[1].Header.Set("Location", "/y")
	pages[4].Header.Set("Content-Encoding", "gzip")
	pages[4].DecodedFrom = "gzip"
	err = db.Bolt().Update(func(tx *bbolt.Tx) error {
		for _, p := range pages {
			if _, err := storage.PutPage(tx, p); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func runExport(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = dispatch(append([]string{"export"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

func TestExportJSONL(t *testing.T) {
	dir := newExportStore(t)
	out := filepath.Join(t.TempDir(), "pages.jsonl")
	code, _, stderr := runExport(t, "--data", dir, "--format", "jsonl", "--out", out)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stderr, "5 pages written (0 filtered out) to "+out+",") {
		t.Errorf("summary: %q", stderr)
	}
	lines := readLines(t, out)
	if len(lines) != 5 {
		t.Fatalf("%d lines, want 5", len(lines))
	}
	var first map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatal(err)
	}
	if first["url"] != "http://a.example/" || first["body"] != "<a href=/x>x</a>" || first["status"] != float64(200) {
		t.Errorf("first line: %v", first)
	}

	// The same file again: refused, not overwritten.
	if code, _, stderr := runExport(t, "--data", dir, "--format", "jsonl", "--out", out); code != exitRuntime || !strings.Contains(stderr, "already exists") {
		t.Errorf("second export to the same file: exit %d, %q", code, stderr)
	}

	// Filters and --no-body, to stdout.
	code, stdout, stderr := runExport(t, "--data", dir, "--format", "jsonl", "--out", "-", "--no-body",
		"--host", "a.example", "--status", "2xx,404", "--since", exportT0.Add(time.Second).Format(time.RFC3339))
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	got := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(got) != 1 || !strings.Contains(got[0], `"url":"http://a.example/y"`) || strings.Contains(got[0], `"body"`) {
		t.Errorf("filtered output: %q", stdout)
	}
	if !strings.Contains(stderr, "1 pages written (4 filtered out)") {
		t.Errorf("summary: %q", stderr)
	}
}

func TestExportWARC(t *testing.T) {
	dir := newExportStore(t)
	out := t.TempDir() + string(filepath.Separator)
	code, _, stderr := runExport(t, "--data", dir, "--format", "warc", "--out", out, "--warc-max-size", "1K")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	files, _ := filepath.Glob(filepath.Join(out, "crawl-*.warc.gz"))
	if len(files) < 2 || !strings.Contains(stderr, fmt.Sprintf("5 pages written (0 filtered out) to %d files: %s", len(files), files[0])) {
		t.Fatalf("files %v; summary %q", files, stderr)
	}
	responses := 0
	for _, f := range files {
		eachWARCRecord(t, f, func(rec gowarc.WarcRecord) {
			if rec.Type() == gowarc.Response {
				responses++
			}
		})
	}
	if responses != 5 {
		t.Errorf("%d response records, want 5", responses)
	}
}

// eachWARCRecord calls fn for every record of the WARC file at path, in order, failing the test
// unless each is valid under gowarc's strict validation. A record's block is readable until fn
// returns.
func eachWARCRecord(t *testing.T, path string, fn func(rec gowarc.WarcRecord)) {
	t.Helper()
	r, err := gowarc.NewWarcFileReader(path, 0, gowarc.WithStrictValidation())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for {
		rec, _, v, err := r.Next()
		if err == io.EOF {
			return
		}
		if err != nil || !v.Valid() {
			t.Fatalf("%s: %v %v", path, err, v)
		}
		fn(rec)
	}
}

func TestExportMirror(t *testing.T) {
	dir := newExportStore(t)
	out := filepath.Join(t.TempDir(), "site")
	code, _, stderr := runExport(t, "--data", dir, "--format", "mirror", "--out", out)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	// Only 2xx answers and redirects get a file, named after their Content-Type; links are
	// converted (the redirect's chain ends at a 404, so its link stays absolute).
	for name, want := range map[string]string{
		"a.example/index.html":       `<a href="http://a.example/x">x</a>`,
		"a.example/x.html":           `url=http://a.example/y"`,
		"b.example+8080/img.png":     "\x89PNG\r\n\x1a\n\x00\x01",
		"b.example+8080/z/index.txt": "zzz",
	} {
		b, err := os.ReadFile(filepath.Join(out, filepath.FromSlash(name)))
		if err != nil || !strings.Contains(string(b), want) {
			t.Errorf("%s: %q, %v; want %q", name, b, err, want)
		}
	}
	if m, _ := filepath.Glob(filepath.Join(out, "a.example", "y*")); len(m) > 0 {
		t.Errorf("the 404 body was written: %q", m)
	}
	if !strings.Contains(stderr, "4 pages written (0 filtered out, 1 without a file") {
		t.Errorf("summary: %s", stderr)
	}
	out2 := filepath.Join(t.TempDir(), "raw")
	if code, _, stderr := runExport(t, "--data", dir, "--format", "mirror", "--out", out2, "--convert-links=false"); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if b, err := os.ReadFile(filepath.Join(out2, "a.example", "index.html")); string(b) != "<a href=/x>x</a>" {
		t.Errorf("--convert-links=false: index.html = %q, %v; want the stored body", b, err)
	}
}

// TestExportLockedStore: while a crawl holds the store, export fails at once with a clear
// message instead of waiting.
func TestExportLockedStore(t *testing.T) {
	dir := newExportStore(t)
	db, err := storage.Open(dir, &storage.Options{NoSync: true}) // the "running crawl"
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	start := time.Now()
	code, _, stderr := runExport(t, "--data", dir, "--format", "jsonl", "--out", filepath.Join(t.TempDir(), "x.jsonl"))
	if want := fmt.Sprintf("is in use by a running crawl (process %d); stop it or wait", os.Getpid()); code != exitRuntime || !strings.Contains(stderr, want) {
		t.Errorf("exit %d, %q", code, stderr)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v to give up", d)
	}
}

func TestExportUsage(t *testing.T) {
	dir := newExportStore(t)
	out := filepath.Join(t.TempDir(), "o")
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"no flags", nil, exitUsage, "usage: crawl export"},
		{"no out", []string{"--data", dir, "--format", "warc"}, exitUsage, "usage: crawl export"},
		{"bad format", []string{"--data", dir, "--format", "zip", "--out", out}, exitUsage, `unknown format "zip"`},
		{"no-body warc", []string{"--data", dir, "--format", "warc", "--out", out, "--no-body"}, exitUsage, "--no-body applies to --format jsonl only"},
		{"stdout mirror", []string{"--data", dir, "--format", "mirror", "--out", "-"}, exitUsage, "stdout"},
		{"bad status", []string{"--data", dir, "--format", "jsonl", "--out", out, "--status", "2x"}, exitUsage, "status"},
		{"bad since", []string{"--data", dir, "--format", "jsonl", "--out", out, "--since", "yesterday"}, exitUsage, "--since"},
		{"bad size", []string{"--data", dir, "--format", "warc", "--out", out, "--warc-max-size", "-5"}, exitUsage, "--warc-max-size"},
		{"unknown flag", []string{"--data", dir, "--bogus"}, exitUsage, "bogus"},
		{"no store", []string{"--data", t.TempDir(), "--format", "jsonl", "--out", out}, exitRuntime, "no crawl store in"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runExport(t, tc.args...)
			if code != tc.code || !strings.Contains(stderr, tc.msg) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr, tc.code, tc.msg)
			}
		})
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"1024": 1024, "1K": 1024, "1k": 1024, "2M": 2 << 20, "1G": 1 << 30, "1GiB": 1 << 30, "10KB": 10 << 10} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "0", "-1", "1T", "G", "1.5G", "99999999999G"} {
		if _, err := parseSize(bad); err == nil {
			t.Errorf("parseSize(%q): no error", bad)
		}
	}
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines
}

// TestExportNamedFile: --out X.warc.gz writes X.warc.gz (and X-00001.warc.gz … only when it
// must split) and the summary names the files written; --host NAME matches every port of the
// host; --since takes a date; a removed Content-Encoding is named in WARC-Crawl-Decoded.
func TestExportNamedFile(t *testing.T) {
	dir := newExportStore(t)
	out := filepath.Join(t.TempDir(), "site.warc.gz")
	code, _, stderr := runExport(t, "--data", dir, "--format", "warc", "--out", out)
	files, _ := filepath.Glob(filepath.Join(filepath.Dir(out), "*"))
	if code != exitOK || len(files) != 1 || files[0] != out || !strings.Contains(stderr, "to "+out+",") {
		t.Fatalf("exit %d, files %v, summary %q; want %s alone", code, files, stderr, out)
	}
	raw := gunzip(t, out)
	if !bytes.Contains(raw, []byte("\r\nWARC-Crawl-Decoded: gzip\r\n")) {
		t.Errorf("%s has no WARC-Crawl-Decoded: gzip header line: %q", out, regexp.MustCompile(`(?i)[^\n]*decoded[^\n]*`).FindAll(raw, -1))
	}

	out = filepath.Join(t.TempDir(), "split.warc.gz")
	code, _, stderr = runExport(t, "--data", dir, "--format", "warc", "--out", out, "--warc-max-size", "1K")
	files, _ = filepath.Glob(filepath.Join(filepath.Dir(out), "*"))
	second := strings.TrimSuffix(out, ".warc.gz") + "-00001.warc.gz"
	if code != exitOK || len(files) < 2 || !slices.Contains(files, out) || !slices.Contains(files, second) ||
		!strings.Contains(stderr, fmt.Sprintf("to %d files: %s", len(files), out)) {
		t.Errorf("split export: exit %d, files %v, summary %q; want %s, %s, …", code, files, stderr, out, second)
	}

	for _, tc := range []struct {
		args  []string
		pages int
	}{
		{[]string{"--host", "b.example"}, 2},
		{[]string{"--host", "b.example:8080"}, 2},
		{[]string{"--host", "b.example:9090"}, 0},
		{[]string{"--since", exportT0.Add(-48 * time.Hour).Format(time.DateOnly)}, 5},
		{[]string{"--since", exportT0.Add(48 * time.Hour).Format(time.DateOnly)}, 0},
		{[]string{"--since", exportT0.Add(2 * time.Minute).In(time.Local).Format("2006-01-02 15:04")}, 3},
	} {
		code, stdout, stderr := runExport(t, append([]string{"--data", dir, "--format", "jsonl", "--out", "-", "--no-body"}, tc.args...)...)
		if n := strings.Count(stdout, "\n"); code != exitOK || n != tc.pages {
			t.Errorf("%q: exit %d, %d pages, want %d\n%s", tc.args, code, n, tc.pages, stderr)
		}
	}
	if code, _, stderr := runExport(t, "--data", dir, "--format", "jsonl", "--out", "-", "--since", "May 1st"); code != exitUsage || !strings.Contains(stderr, `--since "May 1st": want a date (2024-05-01)`) {
		t.Errorf("--since 'May 1st': exit %d, %q", code, stderr)
	}
}

func gunzip(t *testing.T, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
