package learnedfile

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// Source is a store whose hosts' learned politeness can be read (storage.DB).
type Source interface {
	HostStates(fn func(host string, state []byte) error) error
}

// learnedLine is one line of a learned-politeness file: a host key and the state the crawl
// saved for it (hostlimit's, a JSON object).
type learnedLine struct {
	Host  string          `json:"host"`
	State json.RawMessage `json:"state"`
}

// Bounds on a learned-politeness file read by Read: its size, and one line's.
const (
	MaxSize        = 64 << 20
	maxLearnedLine = 64 << 10
	maxHostKey     = 1024
)

// Write writes the learned politeness of srcs' hosts that keep accepts to w as JSON Lines
// ({"host": KEY, "state": {...}}), one host per line in host order per store; a host in several
// stores is written once per store, and Read keeps the last. It returns the hosts written.
func Write(w io.Writer, keep func(host string) bool, srcs ...Source) (int, error) {
	bw := bufio.NewWriter(w)
	n := 0
	for _, src := range srcs {
		if err := src.HostStates(func(host string, state []byte) error {
			if !keep(host) {
				return nil
			}
			if !json.Valid(state) || len(state) == 0 || state[0] != '{' {
				return fmt.Errorf("learnedfile: learned state of %q is not a JSON object", host)
			}
			b, err := json.Marshal(learnedLine{Host: host, State: state})
			if err != nil {
				return err
			}
			n++
			bw.Write(b)
			return bw.WriteByte('\n')
		}); err != nil {
			return n, err
		}
	}
	return n, bw.Flush()
}

// ErrNotLearned marks a learned-politeness file that cannot be read as one.
var ErrNotLearned = errors.New("not a learned-politeness file")

// Read reads a file written by Write into a map of host key to state. A file
// over MaxSize, a line over 64 KiB, a line that is not {"host": KEY, "state": {...}} or a
// host key that is empty or over 1,024 bytes is an error naming the file and line.
func Read(path string) (map[string][]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, err
	} else if fi.Size() > MaxSize {
		return nil, fmt.Errorf("%s: %d bytes, over the %d MiB a learned-politeness file may have (use the crawl's data directory instead): %w",
			path, fi.Size(), MaxSize>>20, ErrNotLearned)
	}
	states := make(map[string][]byte)
	sc := bufio.NewScanner(io.LimitReader(f, MaxSize))
	sc.Buffer(make([]byte, 0, 4096), maxLearnedLine)
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var l learnedLine
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&l); err != nil {
			return nil, fmt.Errorf("%s:%d: %w: %v", path, line, ErrNotLearned, err)
		}
		switch {
		case l.Host == "" || len(l.Host) > maxHostKey:
			return nil, fmt.Errorf("%s:%d: %w: want a host key of 1 to %d bytes", path, line, ErrNotLearned, maxHostKey)
		case len(l.State) == 0 || l.State[0] != '{':
			return nil, fmt.Errorf("%s:%d: %w: host %q: want its state as a JSON object", path, line, ErrNotLearned, l.Host)
		}
		states[l.Host] = bytes.Clone(l.State)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("%s:%d: %w: a line over %d KiB", path, line+1, ErrNotLearned, maxLearnedLine>>10)
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return states, nil
}
