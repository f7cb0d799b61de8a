package export

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReplaceOutput: a ReplaceOutput file replaces an existing one only on Commit, in one
// rename; until then, and after Abort, the old file is there, whole.
func TestReplaceOutput(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.jsonl")
	if err := os.WriteFile(path, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o, err := ReplaceOutput(path)
	if err != nil {
		t.Fatal(err)
	}
	o.WriteString("new\n")
	if b, _ := os.ReadFile(path); string(b) != "old\n" {
		t.Fatalf("before Commit: %q, want the old file", b)
	}
	o.Abort()
	if b, _ := os.ReadFile(path); string(b) != "old\n" || len(entries(t, dir)) != 1 {
		t.Fatalf("after Abort: %q, %q; want the old file alone", b, entries(t, dir))
	}
	o, err = ReplaceOutput(path)
	if err != nil {
		t.Fatal(err)
	}
	o.WriteString("new\n")
	if err := o.Commit(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "new\n" || len(entries(t, dir)) != 1 {
		t.Fatalf("after Commit: %q, %q; want the new file alone", b, entries(t, dir))
	}
}

// TestWARCReplace: with Replace, a series replaces an older, longer one with the same names
// only when complete (stopped part-way, the old series stays whole), and the old series'
// files past the new one's last are removed; without it the export refuses.
func TestWARCReplace(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "site.warc.gz")
	pages := syntheticPages()[:3]
	export := func(maxSize int64, replace bool, ctx context.Context) error {
		w, err := NewWARC(out, &WARCOptions{MaxSize: maxSize, Rand: seededReader(testSeed), Replace: replace})
		if err != nil {
			return err
		}
		_, err = RunWARC(ctx, sliceSource(pages), nil, w, nil)
		return err
	}
	if err := export(1, false, context.Background()); err != nil { // a file per page
		t.Fatal(err)
	}
	old := strings.Join(entries(t, dir), " ")
	if old != "site-00001.warc.gz site-00002.warc.gz site.warc.gz" {
		t.Fatalf("first export: %s", old)
	}
	oldFirst, _ := os.ReadFile(out)
	if err := export(0, false, context.Background()); !errors.Is(err, ErrOutputExists) {
		t.Fatalf("again without Replace: %v, want ErrOutputExists", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := export(0, true, ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("stopped: %v", err)
	}
	if now, _ := os.ReadFile(out); strings.Join(entries(t, dir), " ") != old || string(now) != string(oldFirst) {
		t.Fatalf("after a stopped replacement: %q; want the old series untouched", entries(t, dir))
	}
	if err := export(0, true, context.Background()); err != nil { // one file
		t.Fatal(err)
	}
	if names := entries(t, dir); len(names) != 1 || names[0] != "site.warc.gz" {
		t.Fatalf("after the replacement: %q; want site.warc.gz alone", names)
	}
	if recs := readRawWARC(t, out); len(recs) != 1+2*len(pages) {
		t.Errorf("the new file has %d records, want %d", len(recs), 1+2*len(pages))
	}
}

// TestWARCCloseNameTaken: when a name of the series is taken while the export runs, Close
// fails with ErrOutputExists and withdraws the series: the files it had named are removed, and
// the file that took the name stays as it is.
func TestWARCCloseNameTaken(t *testing.T) {
	dir := t.TempDir()
	w, err := NewWARC(filepath.Join(dir, "site.warc.gz"), &WARCOptions{MaxSize: 1, Rand: seededReader(testSeed)})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range syntheticPages()[:3] {
		if err := w.Write(p); err != nil {
			t.Fatal(err)
		}
	}
	taken := filepath.Join(dir, "site-00001.warc.gz")
	if err := os.WriteFile(taken, []byte("someone else's"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); !errors.Is(err, ErrOutputExists) {
		t.Fatalf("Close: %v, want ErrOutputExists", err)
	}
	names := entries(t, dir)
	if b, _ := os.ReadFile(taken); len(names) != 1 || string(b) != "someone else's" {
		t.Fatalf("after Close: %q, %s holds %q; want that file alone, untouched", names, taken, b)
	}
	if len(w.Files()) != 0 {
		t.Errorf("Files after a withdrawn series: %q", w.Files())
	}
}
