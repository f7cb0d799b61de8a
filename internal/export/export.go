package export

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/idna"

	"github.com/crawl-project/crawl/storage"
)

// Writer writes pages in one export format. Write is called once per page, in fetch order;
// Close finishes the output (flushes, closes files) and must be called even after a Write
// error. Stats may be called at any time; after Close it is final. A Writer is not safe for
// concurrent use.
type Writer interface {
	Write(p *storage.Page) error
	Close() error
	Stats() Stats
}

// Stats counts what an export wrote.
type Stats struct {
	Pages int64 // pages written, sub-resources apart
	// Subresources counts the sub-resources written: responses fetched for the browser that
	// rendered a page (storage.Page.Subresource), each a record pair in WARC and a file in the
	// mirror, and a line or row in JSON Lines and CSV only when they are fed them (see
	// PagesOnly).
	Subresources int64
	Robots       int64 // WARC: robots.txt responses written (RunWARC)
	Skipped      int64 // pages the Filter left out (set by Run)
	Omitted      int64 // mirror: pages that get no file (error statuses, versions a later one replaced)
	Files        int   // output files created (JSONL: the one stream)
	Bytes        int64 // bytes written to the output, after compression
	// Flattened counts the HTML pages (JSONL, CSV) nested deeper than the HTML parser takes,
	// read with their deepest elements flattened (JSONL: "nesting_flattened_at");
	// FlattenedURLs are the first MaxFlattenedURLs of them.
	Flattened     int64
	FlattenedURLs []string
}

// count counts p as written: a page or a sub-resource.
func (s *Stats) count(p *storage.Page) {
	if p.Subresource {
		s.Subresources++
	} else {
		s.Pages++
	}
}

// PagesOnly is src without the sub-resources of rendered pages (storage.Page.Subresource),
// for an export of pages (JSON Lines and CSV by default); it adds the number it leaves out to
// *left, if left is not nil.
func PagesOnly(src Source, left *int64) Source {
	return func(fn func(p *storage.Page) error) error {
		return src(func(p *storage.Page) error {
			if p.Subresource {
				if left != nil {
					*left++
				}
				return nil
			}
			return fn(p)
		})
	}
}

// MaxFlattenedURLs bounds Stats.FlattenedURLs.
const MaxFlattenedURLs = 10

// flattened counts the page u as Flattened.
func (s *Stats) flattened(u string) {
	s.Flattened++
	if len(s.FlattenedURLs) < MaxFlattenedURLs {
		s.FlattenedURLs = append(s.FlattenedURLs, u)
	}
}

// Skipper is implemented by a Writer that needs to see the pages the Filter leaves out (they
// are not written): Run calls Skip for each, in fetch order with the written ones.
type Skipper interface {
	Skip(p *storage.Page)
}

// Source calls fn for every page in fetch order and stops at the first error fn returns,
// returning it. storage.DB.Pages and storage.DB.PagesMeta are Sources.
type Source func(fn func(p *storage.Page) error) error

// Run streams the pages of src that f matches (all pages if f is nil) into w, then closes w.
// It stops at the first error, including ctx being cancelled (checked before each page), and
// returns the stats so far with that error. A writer of files (WARC, mirror) that fails, or
// is stopped by ctx, is withdrawn rather than closed: the files it wrote are removed, so an
// export that does not finish leaves nothing under its output names.
func Run(ctx context.Context, src Source, w Writer, f *Filter) (Stats, error) {
	skipped, err := stream(ctx, src, w.Write, skipOf(w), f)
	return finish(w, skipped, err)
}

// withdrawer is a Writer whose output can be withdrawn after a failure: withdraw removes the
// files it wrote and releases it, as Close would.
type withdrawer interface {
	withdraw()
}

// skipOf returns w's Skip, if w is a Skipper, else nil.
func skipOf(w Writer) func(*storage.Page) {
	if s, ok := w.(Skipper); ok {
		return s.Skip
	}
	return nil
}

// RunWARC is Run for a WARC file that also records robots.txt: after the pages of src it writes
// the robots.txt responses of robots (storage.DB.RobotsFetches) that f matches, in the order they
// were stored (each as its fetch ended), then closes w, or withdraws its files after a
// failure as Run does. Stats.Skipped counts the pages f left out, not robots.txt.
func RunWARC(ctx context.Context, src, robots Source, w *WARCWriter, f *Filter) (Stats, error) {
	skipped, err := stream(ctx, src, w.Write, skipOf(w), f)
	if err == nil && robots != nil {
		_, err = stream(ctx, robots, w.WriteRobots, nil, f)
	}
	return finish(w, skipped, err)
}

// stream calls write for every page of src that f matches, checking ctx before each, and skip
// (if not nil) for the others; it returns how many f left out.
func stream(ctx context.Context, src Source, write func(*storage.Page) error, skip func(*storage.Page), f *Filter) (skipped int64, err error) {
	err = src(func(p *storage.Page) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if !f.Match(p) {
			skipped++
			if skip != nil {
				skip(p)
			}
			return nil
		}
		return write(p)
	})
	return skipped, err
}

// finish closes w after an export, or withdraws it after a failure or ctx's end, and returns
// its stats with skipped, and the first error.
func finish(w Writer, skipped int64, err error) (Stats, error) {
	if wd, ok := w.(withdrawer); ok && err != nil {
		wd.withdraw()
	} else if cerr := w.Close(); err == nil {
		err = cerr
		if err != nil && ok {
			wd.withdraw() // the last file could not be finished: none of them stays
		}
	}
	st := w.Stats()
	st.Skipped = skipped
	return st, err
}

// Filter selects pages by host, status and fetch time. The nil *Filter matches every page.
// A Filter is immutable and safe for concurrent use.
type Filter struct {
	hosts  map[string]bool // host keys (host[:port]) that match; with names empty: any
	names  map[string]bool // host names that match on every port
	status []statusRange   // empty: any
	since  time.Time       // zero: any
}

type statusRange struct{ lo, hi int }

// NewFilter builds a Filter. hosts are host names or host keys; each entry may hold a comma
// separated list; they are normalized like the crawler's host key (lowercase, punycode, default
// port dropped). A name without a port matches that host on every port; host:port (or a URL)
// matches that port only. status is a comma separated list of codes (200), classes (2xx) and ranges
// (400-499); "" means any. since keeps pages fetched at or after it; zero means any. Malformed
// values give an error wrapping ErrBadFilter.
func NewFilter(hosts []string, status string, since time.Time) (*Filter, error) {
	f := &Filter{since: since}
	for _, list := range hosts {
		for h := range strings.SplitSeq(list, ",") {
			h = strings.TrimSpace(h)
			if h == "" {
				continue
			}
			k, err := normalizeHostArg(h)
			if err != nil {
				return nil, fmt.Errorf("%w: host %q: %v", ErrBadFilter, h, err)
			}
			if f.hosts == nil {
				f.hosts, f.names = map[string]bool{}, map[string]bool{}
			}
			if _, _, err := net.SplitHostPort(h); err != nil && !strings.Contains(h, "://") {
				f.names[k] = true
			} else {
				f.hosts[k] = true
			}
		}
	}
	var err error
	if f.status, err = parseStatus(status); err != nil {
		return nil, err
	}
	return f, nil
}

// Match reports whether p passes the filter. The host is taken from p.FinalURL (p.URL if it is
// empty): the host that served the content.
func (f *Filter) Match(p *storage.Page) bool {
	if f == nil {
		return true
	}
	if !f.since.IsZero() && p.FetchedAt.Before(f.since) {
		return false
	}
	if len(f.status) > 0 {
		ok := false
		for _, r := range f.status {
			if p.Status >= r.lo && p.Status <= r.hi {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	if f.hosts != nil {
		u, err := url.Parse(pageURL(p))
		if err != nil || !f.MatchHost(hostKey(u)) {
			return false
		}
	}
	return true
}

// MatchHost reports whether the host key k (host[:port], as the crawl keys hosts) passes the
// filter's hosts.
func (f *Filter) MatchHost(k string) bool {
	if f == nil || f.hosts == nil {
		return true
	}
	name := k
	if h, _, err := net.SplitHostPort(k); err == nil {
		name = h
		if strings.Contains(h, ":") {
			name = "[" + h + "]"
		}
	}
	return f.hosts[k] || f.names[name]
}

func parseStatus(s string) ([]statusRange, error) {
	var out []statusRange
	for part := range strings.SplitSeq(s, ",") {
		part = strings.ToLower(strings.TrimSpace(part))
		if part == "" {
			continue
		}
		bad := fmt.Errorf("%w: status %q: want a code (200), a class (2xx) or a range (400-499)", ErrBadFilter, part)
		var r statusRange
		switch {
		case len(part) == 3 && strings.HasSuffix(part, "xx"):
			d := part[0]
			if d < '1' || d > '5' {
				return nil, bad
			}
			r.lo = int(d-'0') * 100
			r.hi = r.lo + 99
		case strings.Contains(part, "-"):
			a, b, _ := strings.Cut(part, "-")
			lo, err1 := strconv.Atoi(strings.TrimSpace(a))
			hi, err2 := strconv.Atoi(strings.TrimSpace(b))
			if err1 != nil || err2 != nil || lo < 100 || hi > 999 || lo > hi {
				return nil, bad
			}
			r = statusRange{lo, hi}
		default:
			c, err := strconv.Atoi(part)
			if err != nil || c < 100 || c > 999 {
				return nil, bad
			}
			r = statusRange{c, c}
		}
		out = append(out, r)
	}
	return out, nil
}

// pageURL is the URL the page's content came from.
func pageURL(p *storage.Page) string {
	if p.FinalURL != "" {
		return p.FinalURL
	}
	return p.URL
}

// hostKey is the crawler's politeness key for u: lowercase host, default port dropped. Stored
// URLs are already normalized (punycode, canonical IPv6), so this only has to drop the port.
func hostKey(u *url.URL) string {
	host := strings.ToLower(u.Host)
	h, port, err := net.SplitHostPort(host)
	if err != nil {
		return host
	}
	if port == "" || (port == "80" && u.Scheme == "http") || (port == "443" && u.Scheme == "https") {
		if strings.Contains(h, ":") {
			return "[" + h + "]"
		}
		return h
	}
	return host
}

// normalizeHostArg turns a --host value (a host name, maybe with a port, maybe
// internationalized) into a host key. Without a scheme, ports 80 and 443 both count as default.
func normalizeHostArg(s string) (string, error) {
	s = strings.ToLower(s)
	if strings.Contains(s, "://") {
		u, err := url.Parse(s)
		if err != nil {
			return "", err
		}
		s = hostKey(u)
	}
	host, port := s, ""
	if h, p, err := net.SplitHostPort(s); err == nil {
		host, port = h, p
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if ip := net.ParseIP(host); ip != nil {
		host = ip.String()
		if strings.Contains(host, ":") {
			host = "[" + host + "]"
		}
	} else {
		a, err := idna.Lookup.ToASCII(host)
		if err != nil {
			return "", err
		}
		host = a
	}
	if host == "" {
		return "", errors.New("empty host")
	}
	if port == "" || port == "80" || port == "443" {
		return host, nil
	}
	return host + ":" + port, nil
}
