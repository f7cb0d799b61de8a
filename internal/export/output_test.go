package export

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crawl-project/crawl/storage"
)

// entries lists the names in dir.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range des {
		names = append(names, d.Name())
	}
	return names
}

// TestWARCNamedWhenComplete: while an export runs, every file of the series has only its
// temporary name, so a process killed or stopped at any point leaves no file of the series
// under a final name for the next export to trip on; Close names them all; and a file whose
// writing failed never gets its name.
func TestWARCNamedWhenComplete(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "site.warc.gz")
	pages := syntheticPages()
	w, err := NewWARC(out, &WARCOptions{MaxSize: 1, Rand: seededReader(testSeed)}) // a file per page
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range pages[:3] {
		if err := w.Write(p); err != nil {
			t.Fatal(err)
		}
		names := entries(t, dir)
		for _, n := range names {
			if !strings.Contains(n, ".partial-") {
				t.Fatalf("after page %d: %q; %s has a final name before Close", i, names, n)
			}
		}
		if len(names) != i+1 {
			t.Fatalf("after page %d: %q; want %d temporary files", i, names, i+1)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	names := entries(t, dir)
	if len(names) != 3 || len(w.Files()) != 3 || strings.Contains(strings.Join(names, " "), "partial") {
		t.Fatalf("after Close: %q, files %q; want 3 named files and no partial", names, w.Files())
	}
	for _, f := range w.Files() {
		readRawWARC(t, f) // whole
	}

	// A write that fails (the sticky error) leaves the current file unnamed.
	dir2 := t.TempDir()
	w, err = NewWARC(filepath.Join(dir2, "x.warc.gz"), &WARCOptions{Rand: seededReader(testSeed)})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(pages[0]); err != nil {
		t.Fatal(err)
	}
	w.fail(errors.New("disk full"))
	w.Close()
	if names := entries(t, dir2); len(names) != 0 {
		t.Errorf("after a failed write: %q; want nothing", names)
	}
}

// TestCreateOutput: the final name appears only on Commit, never replaces a file, and Abort
// leaves nothing.
func TestCreateOutput(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.jsonl")
	o, err := CreateOutput(path)
	if err != nil {
		t.Fatal(err)
	}
	o.WriteString("{}\n")
	if _, err := os.Stat(path); err == nil {
		t.Fatal("the final name exists before Commit")
	}
	if err := o.Commit(); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "{}\n" {
		t.Fatalf("after Commit: %q, %v", b, err)
	}
	if _, err := CreateOutput(path); !errors.Is(err, ErrOutputExists) {
		t.Errorf("CreateOutput over an existing file: %v, want ErrOutputExists", err)
	}
	o, err = CreateOutput(filepath.Join(dir, "b.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	o2, _ := CreateOutput(filepath.Join(dir, "b.jsonl")) // two writers of one name: the second to finish loses
	o.Commit()
	if err := o2.Commit(); !errors.Is(err, ErrOutputExists) {
		t.Errorf("second Commit of one name: %v, want ErrOutputExists", err)
	}
	o, _ = CreateOutput(filepath.Join(dir, "c.jsonl"))
	o.Abort()
	if names := entries(t, dir); len(names) != 2 {
		t.Errorf("after Abort: %q; want out.jsonl and b.jsonl only", names)
	}
}

// TestCreateOutputRemovesStalePartial: a temporary file left by a killed export (its PID is
// gone) is removed by the next export of the same name; one whose process lives, one without a
// PID and one of another name stay.
func TestCreateOutputRemovesStalePartial(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "site.jsonl")
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatalf("cannot run true for a PID that is gone: %v", err)
	}
	write := func(name string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("cut short"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stale := fmt.Sprintf(".site.jsonl.partial-%d-123", dead.Process.Pid)
	live := fmt.Sprintf(".site.jsonl.partial-%d-456", os.Getppid())
	write(stale)
	write(live)
	write(".site.jsonl.partial-789")
	write(fmt.Sprintf(".other.jsonl.partial-%d-1", dead.Process.Pid))
	o, err := CreateOutput(path)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Abort()
	names := strings.Join(entries(t, dir), " ")
	if strings.Contains(names, stale) {
		t.Errorf("after CreateOutput: %s; the stale partial %s should be gone", names, stale)
	}
	for _, keep := range []string{live, ".site.jsonl.partial-789", ".other.jsonl.partial-"} {
		if !strings.Contains(names, keep) {
			t.Errorf("after CreateOutput: %s; %s should stay", names, keep)
		}
	}
	if !strings.HasPrefix(filepath.Base(o.Name()), fmt.Sprintf(".site.jsonl.partial-%d-", os.Getpid())) {
		t.Errorf("temporary name %s does not carry the writer's PID", o.Name())
	}
}

// failingSource yields pages, then fails as a damaged store does mid-way.
func failingSource(pages []*storage.Page) Source {
	return func(fn func(p *storage.Page) error) error {
		if err := sliceSource(pages)(fn); err != nil {
			return err
		}
		return errors.New("storage: page 9: body: maximum output size exceeded")
	}
}

// TestFailedExportLeavesNothing: a WARC or mirror export whose source fails part-way (a
// damaged store) ends with the source's error and leaves no file under an output name: not
// the file being written, not a split's earlier files, not a mirror's files or the root it
// made; nor does one stopped by its context (Ctrl-C).
func TestFailedExportLeavesNothing(t *testing.T) {
	pages := syntheticPages()[:3]
	t.Run("warc", func(t *testing.T) {
		dir := t.TempDir()
		w, err := NewWARC(filepath.Join(dir, "site.warc.gz"), &WARCOptions{MaxSize: 1, Rand: seededReader(testSeed)}) // a file per page
		if err != nil {
			t.Fatal(err)
		}
		st, err := RunWARC(context.Background(), failingSource(pages), nil, w, nil)
		if err == nil || !strings.Contains(err.Error(), "maximum output size exceeded") {
			t.Fatalf("RunWARC: %v; want the source's error", err)
		}
		if names := entries(t, dir); len(names) != 0 || len(w.Files()) != 0 || st.Files != 0 {
			t.Fatalf("after a failed export: %q on disk, files %q, stats %+v; want nothing", names, w.Files(), st)
		}
	})
	t.Run("mirror", func(t *testing.T) {
		parent := t.TempDir()
		root := filepath.Join(parent, "m")
		src := sliceSource(mirrorPages("http://a.example/", "http://a.example/x/y", "http://b.example/z"))
		w, err := NewMirror(root, src, nil)
		if err != nil {
			t.Fatal(err)
		}
		pages := mirrorPages("http://a.example/", "http://a.example/x/y", "http://b.example/z")
		if _, err := Run(context.Background(), failingSource(pages), w, nil); err == nil {
			t.Fatal("Run: no error from a failing source")
		}
		if names := entries(t, parent); len(names) != 0 {
			t.Fatalf("after a failed mirror: %q beside it; want nothing", names)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		dir := t.TempDir()
		w, err := NewWARC(filepath.Join(dir, "site.warc.gz"), &WARCOptions{MaxSize: 1, Rand: seededReader(testSeed)})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		n := 0
		src := func(fn func(p *storage.Page) error) error {
			return sliceSource(pages)(func(p *storage.Page) error {
				if n++; n == 3 {
					cancel()
				}
				return fn(p)
			})
		}
		if _, err := RunWARC(ctx, src, nil, w, nil); !errors.Is(err, context.Canceled) {
			t.Fatalf("RunWARC: %v; want context.Canceled", err)
		}
		if names := entries(t, dir); len(names) != 0 || len(w.Files()) != 0 {
			t.Fatalf("after a cancelled export: %q, files %q; want nothing", names, w.Files())
		}
	})
	t.Run("cancelled mirror", func(t *testing.T) {
		parent := t.TempDir()
		root := filepath.Join(parent, "m")
		mp := mirrorPages("http://a.example/", "http://a.example/x/y", "http://b.example/z")
		w, err := NewMirror(root, sliceSource(mp), nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		n := 0
		src := func(fn func(p *storage.Page) error) error {
			return sliceSource(mp)(func(p *storage.Page) error {
				if n++; n == 3 {
					cancel()
				}
				return fn(p)
			})
		}
		if _, err := Run(ctx, src, w, nil); !errors.Is(err, context.Canceled) {
			t.Fatalf("Run: %v; want context.Canceled", err)
		}
		if names := entries(t, parent); len(names) != 0 {
			t.Fatalf("after a cancelled mirror: %q beside it; want nothing", names)
		}
	})
}
