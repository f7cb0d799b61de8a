package export

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// fileMode and dirMode are the modes exports create files and directories with, before the
// umask: like any program's output, a file is 0666 &^ umask (0644 under umask 022).
const (
	fileMode fs.FileMode = 0o666
	dirMode  fs.FileMode = 0o777
)

// Output is a file written under a temporary name beside its final one (".NAME.partial-PID-*")
// and given its final name only by Commit: whenever the process dies, the final name holds a
// complete file or nothing, so that a killed export leaves no truncated file for the next one
// to trip on. Commit never replaces an existing file, unless the Output was made by
// ReplaceOutput. The next CreateOutput or ReplaceOutput of the same name removes a temporary
// file whose process is gone.
type Output struct {
	*os.File        // the temporary file: write here
	path     string // the final name
	replace  bool   // Commit renames over an existing file
	tmp      string // the temporary name
}

// CreateOutput starts the output file path. It fails with an error wrapping ErrOutputExists if
// path exists.
func CreateOutput(path string) (*Output, error) {
	if _, err := os.Lstat(path); err == nil {
		return nil, fmt.Errorf("%s: %w", path, ErrOutputExists)
	}
	return newOutput(path, false)
}

// ReplaceOutput is CreateOutput for a path that may exist (crawl export --force): Commit
// replaces the file at path in one rename, so that path holds the old file or the new one,
// whole, at every moment. The new file's mode follows the umask, not the old file's mode.
func ReplaceOutput(path string) (*Output, error) { return newOutput(path, true) }

func newOutput(path string, replace bool) (*Output, error) {
	removeStale(path)
	prefix := filepath.Join(filepath.Dir(path), partialPrefix(path)+strconv.Itoa(os.Getpid())+"-")
	for range 100 {
		name := prefix + strconv.FormatUint(uint64(rand.Uint32()), 10)
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, fileMode)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return &Output{File: f, path: path, replace: replace, tmp: name}, nil
	}
	return nil, fmt.Errorf("%s: no free temporary name %s*", path, prefix)
}

// partialPrefix is the start of the temporary names of path's file, up to the writer's PID.
func partialPrefix(path string) string { return "." + filepath.Base(path) + ".partial-" }

// removeStale removes the temporary files of path left by processes that are gone (killed
// exports). A file it cannot judge (no PID in its name, or a process by that PID exists) stays.
func removeStale(path string) {
	dir, prefix := filepath.Dir(path), partialPrefix(path)
	des, err := os.ReadDir(dir)
	if err != nil {
		return // creating the file will say what is wrong with dir
	}
	for _, d := range des {
		rest, ok := strings.CutPrefix(d.Name(), prefix)
		if !ok || !d.Type().IsRegular() {
			continue
		}
		pidText, _, ok := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if !ok || err != nil || pid <= 0 || pid == os.Getpid() || !processGone(pid) {
			continue
		}
		os.Remove(filepath.Join(dir, d.Name()))
	}
}

// Path is the file's final name.
func (o *Output) Path() string { return o.path }

// Commit is Finish then Rename: the file is synced, closed and given its final name; the
// temporary name is gone whatever the outcome.
func (o *Output) Commit() error {
	if err := o.Finish(); err != nil {
		return err
	}
	return o.Rename()
}

// Finish syncs and closes the file, which keeps its temporary name until Rename. On error the
// temporary file is removed.
func (o *Output) Finish() error {
	err := o.Sync()
	if cerr := o.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(o.tmp)
		return fmt.Errorf("%s: %w", o.path, err)
	}
	return nil
}

// Rename gives a finished file its final name; the temporary name is gone whatever the
// outcome. Made by CreateOutput, it fails with ErrOutputExists if something took the final
// name meanwhile; made by ReplaceOutput, it replaces what is there.
func (o *Output) Rename() error {
	defer os.Remove(o.tmp)
	if o.replace {
		if err := os.Rename(o.tmp, o.path); err != nil {
			return fmt.Errorf("%s: %w", o.path, err)
		}
	} else if err := os.Link(o.tmp, o.path); err != nil {
		// A hard link never replaces the target; a file system without them gets a rename
		// after a check, which only a concurrent writer of the same name could race.
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s: %w", o.path, ErrOutputExists)
		}
		if _, serr := os.Lstat(o.path); serr == nil {
			return fmt.Errorf("%s: %w", o.path, ErrOutputExists)
		}
		if rerr := os.Rename(o.tmp, o.path); rerr != nil {
			return fmt.Errorf("%s: %w", o.path, rerr)
		}
	}
	if d, err := os.Open(filepath.Dir(o.path)); err == nil {
		_ = d.Sync() // make the new name durable
		d.Close()
	}
	return nil
}

// Abort closes the file, if still open, and removes it: the final name is never created.
func (o *Output) Abort() {
	o.Close()
	os.Remove(o.tmp)
}
