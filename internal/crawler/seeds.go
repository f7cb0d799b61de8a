package crawler

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/crawl-project/crawl/internal/urlnorm"
)

// SeedError is one bad line of a seed file, reported as FILE:LINE: reason.
type SeedError struct {
	File   string
	Line   int
	Reason string
}

func (e SeedError) Error() string { return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Reason) }

// maxSeedLine bounds one seed line; longer lines are reported, not read into memory whole.
const maxSeedLine = 64 << 10

// ReadSeeds reads a seed file: one URL per line, blank lines and '#' comments ignored,
// surrounding whitespace trimmed. Bad lines are returned as SeedErrors and skipped; duplicates
// are dropped silently. err is set only when the file cannot be read at all.
func ReadSeeds(path string) (seeds []string, bad []SeedError, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("seed file: %w", err)
	}
	defer f.Close()
	seeds, bad, err = ParseSeeds(f, path)
	if err != nil {
		return nil, nil, fmt.Errorf("seed file %s: %w", path, err)
	}
	return seeds, bad, nil
}

// ParseSeeds is ReadSeeds on an open reader; name is used in error messages.
func ParseSeeds(r io.Reader, name string) (seeds []string, bad []SeedError, err error) {
	br := bufio.NewReaderSize(r, 64<<10)
	seen := map[string]bool{}
	for n := 1; ; n++ {
		line, tooLong, rerr := readLine(br)
		if rerr != nil && rerr != io.EOF {
			return nil, nil, rerr
		}
		if n == 1 {
			line = bytes.TrimPrefix(line, []byte("\ufeff")) // a byte order mark some editors write
		}
		if len(line) == 0 && rerr == io.EOF && !tooLong {
			break
		}
		switch {
		case tooLong:
			bad = append(bad, SeedError{name, n, fmt.Sprintf("line longer than %d bytes", maxSeedLine)})
		case bytes.IndexByte(line, 0) >= 0 || !utf8.Valid(line):
			bad = append(bad, SeedError{name, n, "not text (binary data or invalid UTF-8)"})
		default:
			s := strings.TrimSpace(string(line))
			if s == "" || strings.HasPrefix(s, "#") {
				break
			}
			u, perr := urlnorm.Parse(s)
			if perr != nil {
				bad = append(bad, SeedError{name, n, fmt.Sprintf("%q: %v", truncate(s, 200), perr)})
				break
			}
			if k := u.String(); !seen[k] {
				seen[k] = true
				seeds = append(seeds, k)
			}
		}
		if rerr == io.EOF {
			break
		}
	}
	return seeds, bad, nil
}

// readLine returns one line without its terminator. A line over maxSeedLine is consumed and
// reported as tooLong without being kept.
func readLine(br *bufio.Reader) (line []byte, tooLong bool, err error) {
	for {
		chunk, isPrefix, rerr := br.ReadLine()
		if !tooLong {
			line = append(line, chunk...)
			if len(line) > maxSeedLine {
				tooLong, line = true, nil
			}
		}
		if rerr != nil {
			return line, tooLong, rerr
		}
		if !isPrefix {
			return line, tooLong, nil
		}
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
