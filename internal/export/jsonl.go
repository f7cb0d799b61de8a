package export

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/PuerkitoBio/goquery"
	"golang.org/x/net/html/charset"

	"github.com/crawl-project/crawl/storage"
)

// jsonTimeLayout is fetched_at: RFC 3339 in UTC with microseconds.
const jsonTimeLayout = "2006-01-02T15:04:05.000000Z07:00"

// JSONLOptions configure NewJSONL. A nil *JSONLOptions means the zero value.
type JSONLOptions struct {
	// NoBody leaves "body" and "body_base64" out of every line; the pages may then come from
	// storage.DB.PagesMeta, which does not read the bodies at all. "title" is taken from the
	// body, so it is written only for pages that come with their body.
	NoBody bool
}

// JSONLWriter writes one JSON object per page per line (schema: SCHEMA.md). It is not safe
// for concurrent use.
type JSONLWriter struct {
	bw     *bufio.Writer
	cw     *countWriter
	enc    *json.Encoder
	noBody bool
	stats  Stats
	closed bool
}

// jsonPage is one line. Field order is the order of the schema.
type jsonPage struct {
	URL         string      `json:"url"`
	FinalURL    string      `json:"final_url"`
	Status      int         `json:"status"`
	Headers     http.Header `json:"headers"`
	FetchedAt   string      `json:"fetched_at"`
	DurationMS  float64     `json:"duration_ms"`
	Depth       int         `json:"depth"`
	Parent      string      `json:"parent"`
	ContentType string      `json:"content_type"`
	Truncated   bool        `json:"truncated"`
	DecodedFrom string      `json:"decoded_from"`
	Body        *string     `json:"body,omitempty"`
	BodyBase64  bool        `json:"body_base64,omitempty"`
	Title       *string     `json:"title,omitempty"` // added after the first release: stays last
}

// NewJSONL returns a writer of JSON Lines to w. Close flushes but does not close w.
func NewJSONL(w io.Writer, opts *JSONLOptions) *JSONLWriter {
	var o JSONLOptions
	if opts != nil {
		o = *opts
	}
	cw := &countWriter{w: w}
	bw := bufio.NewWriterSize(cw, 256<<10)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	return &JSONLWriter{bw: bw, cw: cw, enc: enc, noBody: o.NoBody, stats: Stats{Files: 1}}
}

// Write writes p as one line.
func (w *JSONLWriter) Write(p *storage.Page) error {
	if w.closed {
		return ErrClosed
	}
	line := jsonPage{
		URL:         p.URL,
		FinalURL:    p.FinalURL,
		Status:      p.Status,
		Headers:     p.Header,
		FetchedAt:   p.FetchedAt.UTC().Format(jsonTimeLayout),
		DurationMS:  float64(p.Duration.Microseconds()) / float64(time.Millisecond/time.Microsecond),
		Depth:       p.Depth,
		Parent:      p.Parent,
		ContentType: p.ContentType,
		Truncated:   p.Truncated,
		DecodedFrom: p.DecodedFrom,
	}
	if line.Headers == nil {
		line.Headers = http.Header{}
	}
	if !w.noBody {
		var s string
		if IsTextual(p.ContentType) && utf8.Valid(p.Body) {
			s = string(p.Body)
		} else {
			s = base64.StdEncoding.EncodeToString(p.Body)
			line.BodyBase64 = true
		}
		line.Body = &s
	}
	if isHTMLType(p.ContentType) {
		if t, ok := htmlTitle(p.Body, p.Header.Get("Content-Type")); ok {
			line.Title = &t
		}
	}
	if err := w.enc.Encode(&line); err != nil { // Encode appends the newline
		return fmt.Errorf("export: jsonl: %s: %w", p.URL, err)
	}
	w.stats.Pages++
	w.stats.Bytes = w.cw.n + int64(w.bw.Buffered())
	return nil
}

// Close flushes the buffered lines. It is safe to call more than once.
func (w *JSONLWriter) Close() error {
	if w.closed {
		return nil
	}
	w.closed = true
	if err := w.bw.Flush(); err != nil {
		return fmt.Errorf("export: jsonl: %w", err)
	}
	w.stats.Bytes = w.cw.n
	return nil
}

// Stats implements Writer.
func (w *JSONLWriter) Stats() Stats { return w.stats }

// IsTextual reports whether a body of media type ct (lowercase, no parameters, as in
// storage.Page.ContentType) is text: text/*, JSON, XML, JavaScript, HTML and their +json and
// +xml relatives. JSONL writes such bodies as strings when they are valid UTF-8.
func IsTextual(ct string) bool {
	ct = strings.ToLower(strings.TrimSpace(ct))
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = strings.TrimSpace(ct[:i])
	}
	typ, sub, ok := strings.Cut(ct, "/")
	if !ok {
		return false
	}
	if typ == "text" {
		return true
	}
	switch {
	case sub == "json", sub == "xml", sub == "html", sub == "xhtml+xml",
		strings.HasSuffix(sub, "+json"), strings.HasSuffix(sub, "+xml"),
		sub == "javascript", sub == "x-javascript", sub == "ecmascript", sub == "x-ecmascript",
		sub == "ld+json", sub == "x-ndjson", sub == "ndjson", sub == "x-www-form-urlencoded":
		return typ == "application" || typ == "image" && strings.HasSuffix(sub, "+xml")
	}
	return false
}

// isHTMLType reports whether the media type ct (as in storage.Page.ContentType) is HTML.
func isHTMLType(ct string) bool {
	ct = strings.ToLower(strings.TrimSpace(ct))
	return ct == "text/html" || ct == "application/xhtml+xml"
}

// htmlTitle returns the text of an HTML document's title as document.title gives it: the
// first title element in the HTML namespace (not an SVG <title>, not one inside a <template>),
// its text with ASCII whitespace stripped and collapsed. ok is false if there is none.
//
// The bytes are decoded as a browser would: BOM, the charset parameter of contentType (the
// Content-Type header value), a <meta> charset in the first 1024 bytes, else UTF-8 if the bytes
// are valid UTF-8, else windows-1252. Bytes that are valid UTF-8 are read as UTF-8 even against
// a <meta> charset (only a BOM or the header are taken as certain): a legacy charset that
// happens to be valid UTF-8 is rare, a mislabelled UTF-8 page is not. The title is in UTF-8.
//
// goquery parses only as far as the end of the first "</title>" when the title is found there,
// which is where it nearly always is, so a large page costs a small DOM; only when that prefix
// holds no title (the first "</title" was inside a comment or script, or belonged to an SVG
// title) is the whole page parsed.
func htmlTitle(body []byte, contentType string) (title string, ok bool) {
	enc, name, certain := charset.DetermineEncoding(body, contentType)
	if strings.HasPrefix(name, "utf-16") { // not ASCII-compatible: decode before searching
		b, err := enc.NewDecoder().Bytes(body)
		if err != nil {
			return "", false
		}
		body, name, certain = b, "utf-8", true
	}
	if !containsFold(body, []byte("<title")) {
		return "", false
	}
	parse := func(b []byte) (string, bool) {
		if name != "utf-8" && !(!certain && utf8.Valid(b)) { // undeclared but valid UTF-8: UTF-8
			d, err := enc.NewDecoder().Bytes(b)
			if err != nil {
				return "", false
			}
			b = d
		}
		doc, err := goquery.NewDocumentFromReader(bytes.NewReader(b))
		if err != nil {
			return "", false
		}
		sel := doc.Find("title").FilterFunction(func(_ int, s *goquery.Selection) bool {
			return s.Get(0).Namespace == "" && s.ParentsFiltered("template").Length() == 0
		}).First()
		if sel.Length() == 0 {
			return "", false
		}
		return strings.ToValidUTF8(strings.Join(strings.FieldsFunc(sel.Text(), isASCIISpace), " "), "\uFFFD"), true
	}
	if cut := endOfFirstTitle(body); cut > 0 && cut < len(body) {
		if t, ok := parse(body[:cut]); ok {
			return t, true
		}
	}
	return parse(body)
}

// endOfFirstTitle returns the offset just past the first "</title" end tag (up to its '>'),
// or -1 if there is none.
func endOfFirstTitle(b []byte) int {
	for i := 0; ; {
		j := indexFold(b[i:], []byte("</title"))
		if j < 0 {
			return -1
		}
		i += j + len("</title")
		if i < len(b) && (isASCIISpace(rune(b[i])) || b[i] == '/' || b[i] == '>') {
			if k := bytes.IndexByte(b[i:], '>'); k >= 0 {
				return i + k + 1
			}
			return -1
		}
	}
}

// isASCIISpace reports whether r is ASCII whitespace as HTML defines it.
func isASCIISpace(r rune) bool {
	return r == ' ' || r == '\t' || r == '\n' || r == '\f' || r == '\r'
}

// indexFold is bytes.Index ignoring ASCII case; lowerSep must be lowercase ASCII.
func indexFold(b, lowerSep []byte) int {
	for i := 0; i+len(lowerSep) <= len(b); {
		j := bytes.IndexByte(b[i:], lowerSep[0])
		if j < 0 {
			return -1
		}
		i += j
		if i+len(lowerSep) <= len(b) && bytes.EqualFold(b[i:i+len(lowerSep)], lowerSep) {
			return i
		}
		i++
	}
	return -1
}

func containsFold(b, lowerSep []byte) bool { return indexFold(b, lowerSep) >= 0 }
