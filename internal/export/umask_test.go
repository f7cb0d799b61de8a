//go:build unix

package export

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestOutputModesFollowUmask: WARC files, JSON Lines and CSV files (CreateOutput,
// ReplaceOutput), and a mirror's files and directories are created 0666 and 0777 less the
// umask, as any program's output. The umask is process-wide: this test sets it and puts it
// back, and must not run in parallel with others.
func TestOutputModesFollowUmask(t *testing.T) {
	for _, tc := range []struct {
		umask           int
		file, directory fs.FileMode
	}{{0o022, 0o644, 0o755}, {0o077, 0o600, 0o700}, {0o002, 0o664, 0o775}} {
		t.Run(fmt.Sprintf("umask %03o", tc.umask), func(t *testing.T) {
			dir := t.TempDir()
			old := syscall.Umask(tc.umask)
			defer syscall.Umask(old)
			check := func(what, path string, want fs.FileMode) {
				t.Helper()
				fi, err := os.Stat(path)
				if err != nil {
					t.Fatal(err)
				}
				if got := fi.Mode().Perm(); got != want {
					t.Errorf("umask %03o: %s %s is %v, want %v", tc.umask, what, path, got, want)
				}
			}

			w, err := NewWARC(filepath.Join(dir, "warc", "site.warc.gz"), &WARCOptions{Rand: seededReader(testSeed)})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := RunWARC(context.Background(), sliceSource(syntheticPages()[:2]), nil, w, nil); err != nil {
				t.Fatal(err)
			}
			check("WARC file", w.Files()[0], tc.file)
			check("WARC directory", filepath.Join(dir, "warc"), tc.directory)

			for _, name := range []string{"pages.jsonl", "pages.csv"} {
				o, err := CreateOutput(filepath.Join(dir, name))
				if err != nil {
					t.Fatal(err)
				}
				o.WriteString("x\n")
				if err := o.Commit(); err != nil {
					t.Fatal(err)
				}
				check("file", o.Path(), tc.file)
				r, err := ReplaceOutput(o.Path())
				if err != nil {
					t.Fatal(err)
				}
				if err := r.Commit(); err != nil {
					t.Fatal(err)
				}
				check("replaced file", r.Path(), tc.file)
			}

			root := filepath.Join(dir, "mirror")
			pages := mirrorPages("http://a.example/", "http://a.example/x/y")
			m, err := NewMirror(root, sliceSource(pages), nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Run(context.Background(), sliceSource(pages), m, nil); err != nil {
				t.Fatal(err)
			}
			check("mirror root", root, tc.directory)
			check("mirror directory", filepath.Join(root, "a.example", "x"), tc.directory)
			check("mirror file", filepath.Join(root, "a.example", "index.html"), tc.file)
			check("mirror file", filepath.Join(root, "a.example", "x", "y"), tc.file)
		})
	}
}
