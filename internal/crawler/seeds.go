package crawler

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/crawl-project/crawl/frontier"
	"github.com/crawl-project/crawl/internal/urlnorm"
)

// SeedError is one seed line worth reporting, as FILE:LINE: reason: a bad one, skipped, or
// a bare host name, taken as https://HOST/.
type SeedError struct {
	File    string
	Line    int
	Reason  string
	Outcome SeedOutcome
	URL     string // SeedAssumedHTTPS, SeedSchemeOfHost: the URL the line became
}

// SeedOutcome says what became of a reported seed line.
type SeedOutcome int

const (
	// SeedSkipped: the line is not a URL the crawler can fetch; it was left out.
	SeedSkipped SeedOutcome = iota
	// SeedAssumedHTTPS: the line is a bare host name (and maybe a path); it is crawled with
	// https:// in front, and over http if https cannot connect or handshake (HTTPFallback).
	SeedAssumedHTTPS
	// SeedSchemeOfHost: the line is a bare host name whose host:port another seed gives with
	// a scheme; it is crawled with that scheme (SchemesFromSeeds).
	SeedSchemeOfHost
)

func (e SeedError) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("%s: %s", e.File, e.Reason)
	}
	return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Reason)
}

// maxSeedLine bounds one seed line; longer lines are reported, not read into memory whole.
const maxSeedLine = 64 << 10

// ReadSeeds reads a seed file: one URL per line, blank lines and '#' comments ignored,
// surrounding whitespace trimmed; a line with whitespace inside (a URL and more text) is bad. Bad lines are returned as SeedErrors and skipped; duplicates
// are dropped silently. err is set only when the file cannot be read at all, or is binary
// (ErrBinarySeeds).
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

// maxBadSeeds bounds the bad lines reported one by one; the rest are counted in one more
// SeedError, so that a wrong file (a log, a dump) costs little memory and few lines of output.
const maxBadSeeds = 100

// ErrBinarySeeds is returned (wrapped) by ReadSeeds and ParseSeeds for a file that is plainly
// not text: its first 8 KiB hold several NUL bytes.
var ErrBinarySeeds = errors.New("binary data, not a list of URLs")

// ParseSeeds is ReadSeeds on an open reader; name is used in error messages. At most
// maxBadSeeds bad lines are returned one by one; if there were more, a last SeedError (on the
// last bad line) says how many were not listed.
func ParseSeeds(r io.Reader, name string) (seeds []string, bad []SeedError, err error) {
	br := bufio.NewReaderSize(r, 64<<10)
	if head, _ := br.Peek(8 << 10); bytes.Count(head, []byte{0}) >= 8 {
		return nil, nil, ErrBinarySeeds
	}
	seen := map[string]bool{}
	unlisted, lastBad := 0, 0
	report := func(e SeedError) {
		if len(bad) < maxBadSeeds {
			bad = append(bad, e)
			return
		}
		unlisted, lastBad = unlisted+1, e.Line
	}
	defer func() {
		if unlisted > 0 && err == nil {
			bad = append(bad, SeedError{name, lastBad, fmt.Sprintf("… and %d more bad lines, not listed", unlisted), SeedSkipped, ""})
		}
	}()
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
			report(SeedError{name, n, fmt.Sprintf("line longer than %d bytes", maxSeedLine), SeedSkipped, ""})
		case bytes.IndexByte(line, 0) >= 0 || !utf8.Valid(line):
			report(SeedError{name, n, "not text (binary data or invalid UTF-8)", SeedSkipped, ""})
		default:
			s := strings.TrimSpace(string(line))
			if s == "" || strings.HasPrefix(s, "#") {
				break
			}
			if i := strings.IndexFunc(s, unicode.IsSpace); i >= 0 && isURL(s[:i]) {
				shown, _ := urlnorm.RedactPassword(s[:i])
				report(SeedError{name, n, fmt.Sprintf("%q followed by %q: one URL per line (a space in a URL is written %%20)",
					truncate(shown, 200), truncate(strings.TrimSpace(s[i:]), 60)), SeedSkipped, ""})
				break
			}
			guessed := bareHost.MatchString(s) && (strings.Contains(strings.SplitN(s, "/", 2)[0], ".") || strings.HasPrefix(s, "localhost"))
			if guessed {
				s = "https://" + s
			}
			u, perr := urlnorm.Parse(s)
			if perr != nil {
				shown, pass := urlnorm.RedactPassword(s)
				msg := perr.Error()
				if pass != "" {
					msg = strings.ReplaceAll(msg, pass, "…")
				}
				report(SeedError{name, n, fmt.Sprintf("%q: %s", truncate(shown, 200), msg), SeedSkipped, ""})
				break
			}
			if guessed {
				report(SeedError{name, n, "no scheme: crawling " + u.String() + " (http if https does not answer)", SeedAssumedHTTPS, u.String()})
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

// SchemesFromSeeds gives each seed that notes mark SeedAssumedHTTPS the scheme another seed
// gives its host:port (https if seeds give it both): a host a seed names as http:// is not
// tried over https for a seed written without a scheme. It returns the seeds, in order, and
// notes with those seeds' notes rewritten as SeedSchemeOfHost.
func SchemesFromSeeds(seeds []string, notes []SeedError) ([]string, []SeedError) {
	guessed := map[string]bool{}
	for _, n := range notes {
		if n.Outcome == SeedAssumedHTTPS {
			guessed[n.URL] = true
		}
	}
	known := map[string]string{} // host:port as the URL writes it → scheme
	for _, s := range seeds {
		if u, err := url.Parse(s); err == nil && !guessed[s] && (known[u.Host] == "" || u.Scheme == "https") {
			known[u.Host] = u.Scheme
		}
	}
	became := map[string]string{}
	out := make([]string, 0, len(seeds))
	for _, s := range seeds {
		if u, err := url.Parse(s); err == nil && guessed[s] && known[u.Host] == "http" {
			u.Scheme = "http"
			became[s] = u.String()
			s = u.String()
		}
		out = append(out, s)
	}
	rewritten := make([]SeedError, len(notes))
	for i, n := range notes {
		if to, ok := became[n.URL]; ok && n.Outcome == SeedAssumedHTTPS {
			n.Outcome, n.URL = SeedSchemeOfHost, to
			n.Reason = "no scheme: crawling " + to + " (the scheme another seed gives this host)"
		}
		rewritten[i] = n
	}
	return out, rewritten
}

// isURL reports whether s is a URL the crawler could fetch, with its scheme or a bare host
// name with a dot in it.
func isURL(s string) bool {
	if bareHost.MatchString(s) && strings.Contains(strings.SplitN(s, "/", 2)[0], ".") {
		return true
	}
	_, err := urlnorm.Parse(s)
	return err == nil
}

// bareHost matches a seed written without a scheme: a host name or address, maybe a port,
// maybe a path ("www.example.com", "localhost:8080/docs/").
var bareHost = regexp.MustCompile(`^[\p{L}\p{N}-]+(\.[\p{L}\p{N}-]+)*\.?(:[0-9]{1,5})?([/?#].*)?$`)

// ParseSeedArgs is ParseSeeds on URLs given as command-line arguments, one URL each; reports
// name the argument as "argument N".
func ParseSeedArgs(args []string) (seeds []string, notes []SeedError) {
	for i, a := range args {
		u, bad, _ := ParseSeeds(strings.NewReader(a), "argument")
		seeds = append(seeds, u...)
		for _, b := range bad {
			b.File, b.Line = fmt.Sprintf("argument %d", i+1), 0
			notes = append(notes, b)
		}
	}
	return seeds, notes
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

// addSeeds widens the scope with seeds and enqueues them, their credentials moved to auth.
func (c *Crawler) addSeeds(seeds []string, auth map[string]*url.Userinfo) error {
	if len(seeds) == 0 {
		return nil
	}
	var entries []frontier.Entry
	var excluded []frontier.Exclusion
	for _, s := range seeds {
		u, err := urlnorm.Parse(s)
		if err != nil {
			return fmt.Errorf("seed %q: %w", s, err)
		}
		takeUser(u, auth)
		c.scope.AddSeed(u)
		e := frontier.Entry{URL: u.String(), Host: urlnorm.HostKey(u)}
		if r := c.scope.Check(u); r != "" {
			excluded = append(excluded, frontier.Exclusion{Entry: e, Reason: r, Detail: "seed matches --include/--exclude"})
			continue
		}
		entries = append(entries, e)
	}
	if err := c.saveScope(); err != nil {
		return err
	}
	if len(excluded) > 0 {
		if err := c.fr.Exclude(excluded); err != nil {
			return err
		}
	}
	for len(entries) > 0 {
		n := min(len(entries), seedChunk)
		if _, err := c.fr.Add(entries[:n]); err != nil {
			return err
		}
		entries = entries[n:]
	}
	return nil
}

// seedChunk is how many seeds addSeeds enqueues per transaction, so that a seed list of a
// million sites never builds one transaction of that size in memory. A run killed meanwhile
// keeps the chunks committed; the same seed file given again adds the rest.
var seedChunk = 10_000
