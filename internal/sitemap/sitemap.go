package sitemap

import (
	"bytes"
	"compress/gzip"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// The protocol's limits per file.
const (
	MaxURLs  = 50_000
	MaxBytes = 50 << 20
)

var (
	// ErrNotSitemap is returned by Parse when the document's root is neither <urlset> nor
	// <sitemapindex>: the body is not a sitemap (an HTML page, an RSS feed).
	ErrNotSitemap = errors.New("not a sitemap")
	// ErrTooBig is returned by Parse, with the entries before the limit, when a file lists
	// more than MaxURLs entries or is longer than MaxBytes uncompressed.
	ErrTooBig = errors.New("sitemap over the protocol's limits")
	// ErrMalformed is returned by Parse, with the entries read so far, when the XML or the
	// gzip stream is broken.
	ErrMalformed = errors.New("malformed sitemap")
)

// Kind says what a sitemap file lists.
type Kind uint8

const (
	// URLSet lists pages.
	URLSet Kind = iota + 1
	// Index lists other sitemap files.
	Index
)

// Entry is one <url> or <sitemap> of a file.
type Entry struct {
	Loc     string    // as written, trimmed
	LastMod time.Time // zero when absent or unreadable
}

// Limits bounds Parse; the zero value means the protocol's (MaxURLs, MaxBytes).
type Limits struct {
	URLs  int
	Bytes int64
}

// IsGzip reports whether body starts with the gzip magic bytes.
func IsGzip(body []byte) bool { return len(body) >= 2 && body[0] == 0x1f && body[1] == 0x8b }

// Sniff returns the kind of sitemap body is by its root element alone (0 if it is none),
// without reading its entries: what a caller needs to know before deciding how many to read.
func Sniff(body []byte) Kind {
	d, _, _, err := newDecoder(body, MaxBytes)
	if err != nil {
		return 0
	}
	for {
		tok, err := d.Token()
		if err != nil {
			return 0
		}
		if t, ok := tok.(xml.StartElement); ok {
			switch t.Name.Local {
			case "urlset":
				return URLSet
			case "sitemapindex":
				return Index
			}
			return 0
		}
	}
}

// newDecoder returns an XML decoder of body (decompressed if it is gzip), reading at most n
// bytes through lr, and badCharset, set while a charset other than UTF-8 is declared.
func newDecoder(body []byte, n int64) (d *xml.Decoder, lr *limitedReader, badCharset *bool, err error) {
	var r io.Reader = bytes.NewReader(body)
	if IsGzip(body) {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("%w: gzip: %v", ErrMalformed, err)
		}
		r = zr
	}
	lr = &limitedReader{r: r, n: n}
	d = xml.NewDecoder(lr)
	d.Strict = false
	badCharset = new(bool)
	d.CharsetReader = func(label string, in io.Reader) (io.Reader, error) {
		*badCharset = true
		if l := strings.ToLower(label); l == "utf-8" || l == "us-ascii" || l == "ascii" {
			*badCharset = false
			return in, nil
		}
		return nil, fmt.Errorf("charset %q (sitemaps are UTF-8)", label)
	}
	return d, lr, badCharset, nil
}

// Parse reads one sitemap file. It returns the file's kind and its entries in order. On
// ErrTooBig or ErrMalformed the entries before the problem are returned too.
func Parse(body []byte, lim Limits) (Kind, []Entry, error) {
	if lim.URLs <= 0 {
		lim.URLs = MaxURLs
	}
	if lim.Bytes <= 0 {
		lim.Bytes = MaxBytes
	}
	d, lr, badCharset, err := newDecoder(body, lim.Bytes)
	if err != nil {
		return 0, nil, err
	}
	var (
		kind    Kind
		entries []Entry
		cur     *Entry
		field   string
		text    strings.Builder
	)
	fail := func(err error) (Kind, []Entry, error) {
		if lr.over {
			return kind, entries, fmt.Errorf("%w: longer than %d bytes uncompressed", ErrTooBig, lim.Bytes)
		}
		return kind, entries, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	for {
		tok, err := d.Token()
		if err == io.EOF {
			if kind == 0 {
				return 0, nil, ErrNotSitemap
			}
			return kind, entries, nil
		}
		if err != nil {
			if kind == 0 && !lr.over && !*badCharset && !IsGzip(body) {
				return 0, nil, fmt.Errorf("%w: %v", ErrNotSitemap, err)
			}
			return fail(err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			name := t.Name.Local
			switch {
			case kind == 0:
				switch name {
				case "urlset":
					kind = URLSet
				case "sitemapindex":
					kind = Index
				default:
					return 0, nil, ErrNotSitemap
				}
			case cur == nil && (kind == URLSet && name == "url" || kind == Index && name == "sitemap"):
				if len(entries) >= lim.URLs {
					return kind, entries, fmt.Errorf("%w: more than %d entries", ErrTooBig, lim.URLs)
				}
				cur = &Entry{}
			case cur != nil && (name == "loc" || name == "lastmod"):
				field = name
				text.Reset()
			}
		case xml.CharData:
			if field != "" {
				text.Write(t)
			}
		case xml.EndElement:
			name := t.Name.Local
			switch {
			case cur != nil && name == field:
				v := strings.TrimSpace(text.String())
				if field == "loc" {
					cur.Loc = v
				} else {
					cur.LastMod = parseW3CDate(v)
				}
				field = ""
			case cur != nil && (name == "url" || name == "sitemap"):
				if cur.Loc != "" {
					entries = append(entries, *cur)
				}
				cur = nil
			}
		}
	}
}

// parseW3CDate reads the W3C Datetime forms sitemaps use (2005-01-01,
// 2005-01-01T12:00+01:00, with seconds and fractions); zero if none fits.
func parseW3CDate(s string) time.Time {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04Z07:00", "2006-01-02", "2006-01", "2006"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC()
		}
	}
	return time.Time{}
}

// limitedReader reads at most n bytes and notes whether there was more.
type limitedReader struct {
	r    io.Reader
	n    int64
	over bool
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		var one [1]byte
		if k, _ := l.r.Read(one[:]); k > 0 {
			l.over = true
			return 0, errors.New("size limit")
		}
		return 0, io.EOF
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	k, err := l.r.Read(p)
	l.n -= int64(k)
	return k, err
}
