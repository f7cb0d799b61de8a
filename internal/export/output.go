package export

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Output is a file written under a temporary name beside its final one (".NAME.partial-PID-*")
// and given its final name only by Commit: whenever the process dies, the final name holds a
// complete file or nothing, so that a killed export leaves no truncated file for the next one
// to trip on. Commit never replaces an existing file. The next CreateOutput of the same name
// removes a temporary file whose process is gone.
type Output struct {
	*os.File        // the temporary file: write here
	path     string // the final name
}

// CreateOutput starts the output file path. It fails with an error wrapping ErrOutputExists if
// path exists.
func CreateOutput(path string) (*Output, error) {
	if _, err := os.Lstat(path); err == nil {
		return nil, fmt.Errorf("%s: %w", path, ErrOutputExists)
	}
	removeStale(path)
	f, err := os.CreateTemp(filepath.Dir(path), partialPrefix(path)+strconv.Itoa(os.Getpid())+"-*")
	if err != nil {
		return nil, err
	}
	return &Output{File: f, path: path}, nil
}

// partialPrefix is the start of the temporary names of path's file, up to the writer's PID.
func partialPrefix(path string) string { return "." + filepath.Base(path) + ".partial-" }

// removeStale removes the temporary files of path left by processes that are gone (killed
// exports). A file it cannot judge (no PID in its name, or a process by that PID exists) stays.
func removeStale(path string) {
	dir, prefix := filepath.Dir(path), partialPrefix(path)
	des, err := os.ReadDir(dir)
	if err != nil {
		return // CreateTemp will say what is wrong with dir
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

// Commit syncs and closes the file and gives it its final name; the temporary name is gone
// whatever the outcome. It fails with ErrOutputExists if something took the final name
// meanwhile.
func (o *Output) Commit() error {
	tmp := o.Name()
	defer os.Remove(tmp)
	err := o.Sync()
	if cerr := o.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s: %w", o.path, err)
	}
	// A hard link never replaces the target; a file system without them gets a rename after a
	// check, which only a concurrent writer of the same name could race.
	if err := os.Link(tmp, o.path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s: %w", o.path, ErrOutputExists)
		}
		if _, serr := os.Lstat(o.path); serr == nil {
			return fmt.Errorf("%s: %w", o.path, ErrOutputExists)
		}
		if rerr := os.Rename(tmp, o.path); rerr != nil {
			return fmt.Errorf("%s: %w", o.path, rerr)
		}
	}
	if d, err := os.Open(filepath.Dir(o.path)); err == nil {
		_ = d.Sync() // make the new name durable
		d.Close()
	}
	return nil
}

// Abort closes the file and removes it: the final name is never created.
func (o *Output) Abort() {
	o.Close()
	os.Remove(o.Name())
}
