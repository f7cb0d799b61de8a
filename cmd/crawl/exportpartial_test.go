//go:build linux

package main

import (
	"context"
	"encoding/binary"
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
