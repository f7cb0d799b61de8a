//go:build linux

package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
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
