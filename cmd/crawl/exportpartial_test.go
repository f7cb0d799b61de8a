//go:build linux

package main

import (
	"context"
	"encoding/binary"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/crawl-project/crawl/storage"
)

// TestExportCutShortLeavesNoFile: an export that cannot finish its file (here the file may not
// grow past 1,000 bytes: RLIMIT_FSIZE, as a full disk) exits 1 and leaves nothing under the
// output's name, so the same export run again, with room, writes it.
func TestExportCutShortLeavesNoFile(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns crawl processes")
	}
	store := newExportStore(t)
	for _, format := range []string{"warc", "jsonl"} {
		t.Run(format, func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "out."+format)
			if format == "warc" {
				out += ".gz"
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd, msg := crawlProcess(ctx, "export", "--data", store, "--format", format, "--out", out)
			cmd.Env = append(cmd.Env, "CRAWL_TEST_FSIZE=1000")
			cmd.Run()
			if code := cmd.ProcessState.ExitCode(); code != exitRuntime {
				t.Fatalf("exit %d, want %d:\n%s", code, exitRuntime, msg)
			}
			if names := entries(t, dir); len(names) != 0 {
				t.Fatalf("a failed export left %q:\n%s", names, msg)
			}
			if code, _, errb := runExport(t, "--data", store, "--format", format, "--out", out); code != exitOK {
				t.Fatalf("the export again, with room: exit %d\n%s", code, errb)
			}
			if fi, err := os.Stat(out); err != nil || fi.Size() <= 1000 {
				t.Errorf("%s after the second export: %v", out, err)
			}
		})
	}
}

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

// damagedBodyStore is newExportStore with one more HTML page, last, whose stored body is a
// zstd frame that claims 1 TiB: reading it fails as on a damaged store (the size past the
// decoder's limit), after the other pages were read.
func damagedBodyStore(t *testing.T) string {
	t.Helper()
	dir := newExportStore(t)
	db, err := storage.Open(dir, &storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Bolt().Update(func(tx *bbolt.Tx) error {
		u := "http://a.example/last"
		seq, err := storage.PutPage(tx, &storage.Page{URL: u, FinalURL: u, Status: 200, ContentType: "text/html",
			Header: http.Header{"Content-Type": {"text/html"}}, FetchedAt: exportT0.Add(time.Hour), Body: []byte("<title>t</title>")})
		if err != nil {
			return err
		}
		frame := append([]byte{0x28, 0xb5, 0x2f, 0xfd, 0xe0}, binary.LittleEndian.AppendUint64(nil, 1<<40)...)
		frame = append(frame, 0x01, 0x00, 0x00) // a last raw block of no bytes
		return tx.Bucket([]byte("bodies")).Put(binary.BigEndian.AppendUint64(nil, seq), frame)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestExportFailingStoreLeavesNothing: an export in any format whose store fails to give a
// page part-way (a damaged body) exits 1 naming the cause and leaves nothing under the
// output's name: no WARC file, JSON Lines or CSV file, or mirror.
func TestExportFailingStoreLeavesNothing(t *testing.T) {
	store := damagedBodyStore(t)
	for _, format := range []string{"warc", "jsonl", "csv", "mirror"} {
		t.Run(format, func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "out."+format)
			args := []string{"--data", store, "--format", format, "--out", out}
			switch format {
			case "warc":
				args[len(args)-1] += ".gz"
			case "csv":
				args = append(args, "--field", "title=title")
			}
			code, _, stderr := runExport(t, args...)
			if code != exitRuntime || !strings.Contains(stderr, "page 6: body") || !strings.Contains(stderr, "to nothing (removed)") {
				t.Fatalf("exit %d, want %d, the cause and nothing written:\n%s", code, exitRuntime, stderr)
			}
			if names := entries(t, dir); len(names) != 0 {
				t.Fatalf("a failed export left %q:\n%s", names, stderr)
			}
		})
	}
}

// TestExportInterruptedLeavesNothing: an export interrupted (Ctrl-C: here its context is done
// after 3 pages, when a split WARC has 3 files) exits 130, says that it left nothing under its output's name, and
// leaves nothing there, in any format, so that the same export run again writes it.
func TestExportInterruptedLeavesNothing(t *testing.T) {
	store := newExportStore(t)
	defer func(old func() (context.Context, context.CancelFunc)) { exportContext = old }(exportContext)
	for _, format := range []string{"warc", "jsonl", "csv", "mirror", "warc split"} {
		t.Run(format, func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "out."+format)
			args := []string{"--data", store, "--format", format, "--out", out}
			switch format {
			case "warc":
				args[len(args)-1] += ".gz"
			case "warc split":
				args[3], args[5] = "warc", filepath.Join(dir, "split") // split-00000.warc.gz …
				args = append(args, "--warc-max-size", "1")
			}
			exportContext = func() (context.Context, context.CancelFunc) {
				ctx, cancel := context.WithCancel(context.Background())
				return &interruptAfter{Context: ctx, cancel: cancel, n: 3}, cancel
			}
			code, _, stderr := runExport(t, args...)
			if code != exitInterrupted || !strings.Contains(stderr, "interrupted; nothing was left under "+args[5]) {
				t.Fatalf("exit %d, want %d and where nothing was left:\n%s", code, exitInterrupted, stderr)
			}
			if names := entries(t, dir); len(names) != 0 {
				t.Fatalf("an interrupted export left %q:\n%s", names, stderr)
			}
			exportContext = func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }
			if code, _, errb := runExport(t, args...); code != exitOK {
				t.Fatalf("the export again: exit %d\n%s", code, errb)
			}
		})
	}
}

// TestExportForce: an export to an existing output refuses and names --force; with --force
// it replaces the output (the old WARC series' extra files too); a mirror refuses --force.
func TestExportForce(t *testing.T) {
	store := newExportStore(t)
	for _, format := range []string{"jsonl", "csv", "warc", "learned"} {
		t.Run(format, func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "out."+format)
			args := []string{"--data", store, "--format", format, "--out", out}
			if format == "warc" {
				args[len(args)-1] += ".gz"
				out += ".gz"
			}
			first := args
			if format == "warc" {
				first = append(first, "--warc-max-size", "1") // a file per page
			}
			if code, _, errb := runExport(t, first...); code != exitOK {
				t.Fatalf("first export: exit %d\n%s", code, errb)
			}
			code, _, errb := runExport(t, args...)
			if code != exitRuntime || !strings.Contains(errb, "output already exists") || !strings.Contains(errb, "--force replaces it") {
				t.Fatalf("again without --force: exit %d, want %d, the output exists and --force:\n%s", code, exitRuntime, errb)
			}
			if err := os.WriteFile(out, []byte("old"), 0o644); err != nil {
				t.Fatal(err)
			}
			if code, _, errb := runExport(t, append(args, "--force")...); code != exitOK {
				t.Fatalf("with --force: exit %d\n%s", code, errb)
			}
			if b, err := os.ReadFile(out); err != nil || string(b) == "old" {
				t.Errorf("%s after --force: %q, %v; want the new export", out, b, err)
			}
			if names := entries(t, dir); len(names) != 1 {
				t.Errorf("after --force: %q; want the new output alone", names)
			}
			if format == "learned" {
				return // not stopped by a signal: it reads no pages
			}
			before, _ := os.ReadFile(out)
			defer func(old func() (context.Context, context.CancelFunc)) { exportContext = old }(exportContext)
			exportContext = func() (context.Context, context.CancelFunc) {
				ctx, cancel := context.WithCancel(context.Background())
				return &interruptAfter{Context: ctx, cancel: cancel, n: 1}, cancel
			}
			code, _, errb = runExport(t, append(args, "--force", "--warc-max-size", "1")...)
			if code != exitInterrupted || !strings.Contains(errb, "interrupted; "+args[5]+" is as it was") {
				t.Fatalf("--force interrupted: exit %d, want %d and the old output kept:\n%s", code, exitInterrupted, errb)
			}
			if after, _ := os.ReadFile(out); string(after) != string(before) || len(entries(t, dir)) != 1 {
				t.Errorf("after an interrupted --force: %q; want the last output alone, as it was", entries(t, dir))
			}
		})
	}
	code, _, errb := runExport(t, "--data", store, "--format", "mirror", "--out", t.TempDir(), "--force")
	if code != exitUsage || !strings.Contains(errb, "--force applies to files") {
		t.Errorf("mirror --force: exit %d, want %d:\n%s", code, exitUsage, errb)
	}
}

// interruptAfter is a context that is done from its n+1th Err call on: an export (which checks
// it before each page) interrupted after n pages, without timing.
type interruptAfter struct {
	context.Context
	cancel context.CancelFunc
	n      int
}

func (c *interruptAfter) Err() error {
	if c.n > 0 {
		c.n--
		return nil
	}
	c.cancel()
	return c.Context.Err()
}

// TestExportModesFollowUmask: crawl export, run under umask 022 and 077 (set by a shell that
// then runs it: the umask is process-wide, so not set in this process), creates WARC, JSON
// Lines and CSV files and a mirror's files 0666 less the umask, and directories 0777 less it.
func TestExportModesFollowUmask(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("spawns crawl processes")
	}
	store := newExportStore(t)
	for _, tc := range []struct {
		umask           string
		file, directory os.FileMode
	}{{"022", 0o644, 0o755}, {"077", 0o600, 0o700}} {
		t.Run(tc.umask, func(t *testing.T) {
			dir := t.TempDir()
			check := func(path string, want os.FileMode) {
				t.Helper()
				fi, err := os.Stat(path)
				if err != nil {
					t.Fatal(err)
				}
				if fi.Mode().Perm() != want {
					t.Errorf("umask %s: %s is %v, want %v", tc.umask, path, fi.Mode().Perm(), want)
				}
			}
			for _, format := range []string{"warc", "jsonl", "csv", "mirror"} {
				out := filepath.Join(dir, format, "out."+format)
				switch format {
				case "warc":
					out += ".gz"
				case "jsonl", "csv": // files go to an existing directory
					if err := os.Mkdir(filepath.Dir(out), 0o755); err != nil {
						t.Fatal(err)
					}
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				cmd, msg := crawlProcess(ctx, "export", "--data", store, "--format", format, "--out", out)
				cmd.Args = append([]string{"sh", "-c", "umask " + tc.umask + ` && exec "$0" "$@"`}, cmd.Args...)
				cmd.Path = "/bin/sh"
				if err := cmd.Run(); err != nil {
					t.Fatalf("%s: %v\n%s", format, err, msg)
				}
				if format != "mirror" {
					check(out, tc.file)
				}
			}
			check(filepath.Join(dir, "warc"), tc.directory) // made by the WARC export
			files := 0
			err := filepath.WalkDir(filepath.Join(dir, "mirror"), func(path string, d fs.DirEntry, err error) error {
				if err != nil {
					return err
				}
				if d.IsDir() {
					check(path, tc.directory)
				} else {
					check(path, tc.file)
					files++
				}
				return nil
			})
			if err != nil || files < 3 {
				t.Errorf("the mirror: %d files, %v; want 3 or more", files, err)
			}
		})
	}
}
