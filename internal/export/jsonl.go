package export

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/crawl-project/crawl/storage"
)

// jsonTimeLayout is fetched_at: RFC 3339 in UTC with microseconds.
const jsonTimeLayout = "2006-01-02T15:04:05.000000Z07:00"

// JSONLOptions configure NewJSONL. A nil *JSONLOptions means the zero value.
type JSONLOptions struct {
	// NoBody leaves "body" and "body_base64" out of every line; the pages may then come from
	// storage.DB.PagesMeta, which does not read the bodies at all.
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
