package export

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/PuerkitoBio/goquery"
	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
	"golang.org/x/net/html/charset"
	"golang.org/x/text/encoding"

	"github.com/crawl-project/crawl/fetch"
	"github.com/crawl-project/crawl/storage"
)

// jsonTimeLayout is fetched_at: RFC 3339 in UTC with microseconds.
const jsonTimeLayout = "2006-01-02T15:04:05.000000Z07:00"

// JSONLOptions configure NewJSONL. A nil *JSONLOptions means the zero value.
type JSONLOptions struct {
	// NoBody leaves "body" and "body_base64" out of every line; the pages may then come from
	// storage.DB.PagesMeta, which does not read the bodies at all.
	NoBody bool
	// Full, if set, is called with NoBody for an HTML page that comes without its body
	// (Page.Body nil, as from storage.DB.PagesMeta) to read the page whole, body and rendered
	// DOM (storage.DB.Page), so that "title", "charset", "outlinks", "text" and "fields" are
	// written with NoBody too. Without it such pages get none of these fields.
	Full func(p *storage.Page) (*storage.Page, error)
	// Text adds "text", the visible text, to every HTML page.
	Text bool
	// Fields, if any, adds "fields" to every HTML page: an object of each field's value, in
	// this order (ParseFields).
	Fields []Field
}

// JSONLWriter writes one JSON object per page per line (schema: SCHEMA.md). It is not safe
// for concurrent use.
type JSONLWriter struct {
	bw     *bufio.Writer
	cw     *countWriter
	enc    *json.Encoder
	noBody bool
	opts   JSONLOptions
	// redirects maps the URL of each redirect (3xx) written or skipped so far to its referrer,
	// so that the target of a redirect gets the page that linked to the redirect as referrer.
	redirects map[string]string
	stats     Stats
	closed    bool
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
	// Added after the first release, in this order, after all others.
	Title    *string      `json:"title,omitempty"`
	Charset  *string      `json:"charset,omitempty"`
	Outlinks *int         `json:"outlinks,omitempty"`
	Referrer string       `json:"referrer"`
	Text     *string      `json:"text,omitempty"`
	Fields   *fieldValues `json:"fields,omitempty"`
	// FlattenedAt: the page nests deeper than the HTML parser takes, and was read with its
	// elements past this depth flattened (parseHTML).
	FlattenedAt int `json:"nesting_flattened_at,omitempty"`
	// NotModified: the line is the version a 304 confirmed, dated by that 304 (Newest).
	NotModified bool `json:"not_modified,omitempty"`
	// Rendered: the page was rendered in a browser; title, text, outlinks and fields read
	// the rendered DOM. RenderCut names the cap that stopped the render, if one did.
	Rendered  bool   `json:"rendered,omitempty"`
	RenderCut string `json:"render_cut,omitempty"`
	// Subresource: a response fetched for the browser rendering the page named in parent.
	Subresource bool `json:"subresource,omitempty"`
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
	return &JSONLWriter{bw: bw, cw: cw, enc: enc, noBody: o.NoBody, opts: o, redirects: map[string]string{}, stats: Stats{Files: 1}}
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
		NotModified: IsFolded(p),
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
	line.Referrer = w.referrer(p)
	if p.Render != nil {
		line.Rendered = true
		if p.Render.Cut != storage.RenderComplete {
			line.RenderCut = p.Render.Cut.String()
		}
	}
	line.Subresource = p.Subresource
	full, haveBody := p, p.Body != nil || !w.noBody
	if !haveBody && w.opts.Full != nil && isHTMLType(p.ContentType) {
		f, err := w.opts.Full(p)
		if err != nil {
			return fmt.Errorf("export: jsonl: %s: %w", p.URL, err)
		}
		full, haveBody = f, true
	}
	if haveBody && p.Render != nil && full.Rendered == nil {
		haveBody = false // a rendered page read without its DOM: nothing to read its fields in
	}
	switch {
	case isHTMLType(p.ContentType) && haveBody:
		d := newHTMLDecoder(full.Body, p.Header.Get("Content-Type"))
		cs := d.charset()
		line.Charset = &cs
		doc := readDoc(full, d)
		if w.opts.Text || len(w.opts.Fields) > 0 {
			doc.root() // the one parse; title then reads it instead of parsing a prefix
		}
		if t, ok := doc.title(); ok {
			line.Title = &t
		}
		if base := linkBase(p); base != nil && p.Status >= 200 && p.Status < 300 {
			n := outlinks(base, full)
			line.Outlinks = &n
		}
		if w.opts.Text {
			t := doc.text()
			line.Text = &t
		}
		if len(w.opts.Fields) > 0 {
			fv := extractFields(w.opts.Fields, doc.root())
			line.Fields = &fv
		}
		if line.FlattenedAt = doc.flattenedAt; doc.flattenedAt > 0 {
			w.stats.flattened(p.URL)
		}
	case isHTMLType(p.ContentType): // no body to read: charset may come from a <meta>
	case IsTextual(p.ContentType):
		cs := headerCharset(p.Header.Get("Content-Type"))
		line.Charset = &cs
	}
	if err := w.enc.Encode(&line); err != nil { // Encode appends the newline
		return fmt.Errorf("export: jsonl: %s: %w", p.URL, err)
	}
	w.stats.count(p)
	w.stats.Bytes = w.cw.n + int64(w.bw.Buffered())
	return nil
}

// renderedType is how the rendered DOM is read: the browser serialises it as UTF-8, whatever
// the charset of the body it was built from.
const renderedType = "text/html; charset=utf-8"

// readDoc is the decoder of the document title, text, outlinks and fields read in p (whole):
// the rendered DOM if the page was rendered, else d, the body's.
func readDoc(p *storage.Page, d *htmlDecoder) *htmlDecoder {
	if p.Render != nil && p.Rendered != nil {
		return newHTMLDecoder(p.Rendered, renderedType)
	}
	return d
}

// outlinks counts the distinct links the crawler finds in p (whole): those of the body and, for a
// rendered page, of its rendered DOM too, as the crawl follows both.
func outlinks(base *url.URL, p *storage.Page) int {
	links := fetch.ExtractLinks(base, p.Header, p.ContentType, p.Body, "").Links
	if p.Render == nil || p.Rendered == nil {
		return len(links)
	}
	seen := make(map[string]bool, len(links))
	for _, l := range links {
		seen[l.Str] = true
	}
	for _, l := range fetch.ExtractLinks(base, p.Header, p.ContentType, p.Rendered, "").Links {
		seen[l.Str] = true
	}
	return len(seen)
}

// referrer returns the page that linked to p: p.Parent, or, when p.Parent is a redirect seen
// earlier in the export, that redirect's referrer. It records p if p is a redirect.
func (w *JSONLWriter) referrer(p *storage.Page) string {
	ref := p.Parent
	if r, ok := w.redirects[ref]; ok {
		ref = r
	}
	if p.Status >= 300 && p.Status < 400 {
		w.redirects[p.URL] = ref
	} else {
		delete(w.redirects, p.URL) // a URL that stopped redirecting
	}
	return ref
}

// Skip implements Skipper: a redirect left out of the export still passes its referrer on.
func (w *JSONLWriter) Skip(p *storage.Page) { w.referrer(p) }

// linkBase is the URL links in p resolve against; nil if it does not parse.
func linkBase(p *storage.Page) *url.URL {
	u, err := url.Parse(pageURL(p))
	if err != nil {
		return nil
	}
	return u
}

// headerCharset returns the charset parameter of a Content-Type header value, lowercased,
// or "" if there is none.
func headerCharset(contentType string) string {
	_, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		return ""
	}
	return strings.ToLower(strings.TrimSpace(params["charset"]))
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

// htmlDecoder reads an HTML body in the charset a browser would use: BOM, the charset
// parameter of the Content-Type header value, a <meta> charset in the first 1024 bytes, else
// UTF-8 if the bytes are valid UTF-8, else windows-1252. Bytes that are valid UTF-8 are read as
// UTF-8 even against a <meta> charset (only a BOM or the header are taken as certain): a legacy
// charset that happens to be valid UTF-8 is rare, a mislabelled UTF-8 page is not.
type htmlDecoder struct {
	body    []byte // UTF-16 already decoded to UTF-8
	enc     encoding.Encoding
	name    string // WHATWG name of enc; "utf-8" once UTF-16 is decoded
	found   string // name before that
	certain bool
	bad     bool // UTF-16 that did not decode
	// doc is the whole body parsed, once: by root, or by title when it had to (parsed tells
	// which); nil with parsed set if the body does not decode.
	doc    *html.Node
	parsed bool
	// flattenedAt is the depth past which the page's elements were flattened so that the
	// parser would take it (parseHTML); 0 if it took the page as it is.
	flattenedAt int
}

func newHTMLDecoder(body []byte, contentType string) *htmlDecoder {
	d := &htmlDecoder{body: body}
	d.enc, d.name, d.certain = charset.DetermineEncoding(body, contentType)
	d.found = d.name
	if strings.HasPrefix(d.name, "utf-16") { // not ASCII-compatible: decode before searching
		b, err := d.enc.NewDecoder().Bytes(body)
		if err != nil {
			d.bad = true
			return d
		}
		d.body, d.name, d.certain = b, "utf-8", true
	}
	return d
}

// charset is the WHATWG name of the encoding the page is read in ("utf-8", "windows-1252",
// "shift_jis", "utf-16le", ...).
func (d *htmlDecoder) charset() string {
	switch {
	case d.found != d.name: // UTF-16
		return d.found
	case !d.certain && utf8.Valid(d.body):
		return "utf-8"
	}
	return d.name
}

// utf8 returns b, a prefix of d.body, decoded to UTF-8.
func (d *htmlDecoder) utf8(b []byte) ([]byte, bool) {
	if d.bad {
		return nil, false
	}
	if d.name != "utf-8" && !(!d.certain && utf8.Valid(b)) { // undeclared but valid UTF-8: UTF-8
		dec, err := d.enc.NewDecoder().Bytes(b)
		if err != nil {
			return nil, false
		}
		b = dec
	}
	return b, true
}

// htmlTitle returns the text of an HTML document's title as document.title gives it: the
// first title element in the HTML namespace (not an SVG <title>, not one inside a <template>),
// its text with ASCII whitespace stripped and collapsed, in UTF-8. ok is false if there is none.
// contentType is the Content-Type header value; the body is decoded as htmlDecoder says.
func htmlTitle(body []byte, contentType string) (title string, ok bool) {
	return newHTMLDecoder(body, contentType).title()
}

// root returns the whole body parsed as an HTML document, parsing it on the first call only;
// nil if the body does not decode. A leading byte-order mark is not part of the document.
func (d *htmlDecoder) root() *html.Node {
	if !d.parsed {
		d.parsed = true
		if b, ok := d.utf8(d.body); ok {
			d.doc, d.flattenedAt = parseHTML(bytes.TrimPrefix(b, []byte("\uFEFF")))
		}
	}
	return d.doc
}

// htmlParses counts parseHTML's calls, so tests can check that a page is parsed at most once.
var htmlParses atomic.Int64

// parseHTML parses b (UTF-8) as an HTML document. The parser refuses a document nested deeper
// than 512 elements (a byte slice gives it no other error): such a page is parsed again with
// its elements past a depth of flattenDepths flattened (flattenDeep), and flattenedAt is that
// depth. nil if even that is refused.
func parseHTML(b []byte) (doc *html.Node, flattenedAt int) {
	htmlParses.Add(1)
	n, err := html.Parse(bytes.NewReader(b))
	if err == nil {
		return n, 0
	}
	for _, depth := range flattenDepths {
		if n, err := html.Parse(bytes.NewReader(flattenDeep(b, depth))); err == nil {
			return n, depth
		}
	}
	return nil, 0
}

// title is htmlTitle. With the whole body parsed already (root), it reads the title there.
// Otherwise it parses only as far as the end of the first "</title>" when the title is found
// there, which is where it nearly always is, so a large page costs a small DOM; only when that
// prefix holds no title (the first "</title" was inside a comment or script, or belonged to an
// SVG title) is the whole page parsed, through root, so a later root costs nothing.
func (d *htmlDecoder) title() (string, bool) {
	body := d.body
	if d.bad || !containsFold(body, []byte("<title")) {
		return "", false
	}
	if !d.parsed {
		if cut := endOfFirstTitle(body); cut > 0 && cut < len(body) {
			if b, ok := d.utf8(body[:cut]); ok {
				doc, _ := parseHTML(b)
				if t, ok := docTitle(doc); ok {
					return t, true
				}
			}
		}
	}
	return docTitle(d.root())
}

// docTitle returns the text of the first title element in the HTML namespace that is not
// inside a <template>, ASCII whitespace collapsed; ok is false if there is none.
func docTitle(root *html.Node) (string, bool) {
	if root == nil {
		return "", false
	}
	doc := goquery.NewDocumentFromNode(root)
	sel := doc.Find("title").FilterFunction(func(_ int, s *goquery.Selection) bool {
		return s.Get(0).Namespace == "" && s.ParentsFiltered("template").Length() == 0
	}).First()
	if sel.Length() == 0 {
		return "", false
	}
	return collapse(sel.Text()), true
}

// collapse strips and collapses ASCII whitespace and makes s valid UTF-8.
func collapse(s string) string {
	return strings.ToValidUTF8(strings.Join(strings.FieldsFunc(s, isASCIISpace), " "), "\uFFFD")
}

// text returns the page's visible text: the text of the document outside <head>, <script>,
// <style>, <noscript>, <template>, and elements with the hidden attribute, with a space
// between blocks (any element but a phrasing one such as <a>, <b> or <span>) and ASCII
// whitespace collapsed as a browser renders it. "" if the body does not decode.
func (d *htmlDecoder) text() string {
	root := d.root()
	if root == nil {
		return ""
	}
	var sb strings.Builder
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		switch n.Type {
		case html.TextNode:
			sb.WriteString(n.Data)
			return
		case html.ElementNode:
			if n.Namespace == "" && hiddenElements[n.DataAtom] {
				return
			}
			for _, a := range n.Attr {
				if a.Namespace == "" && a.Key == "hidden" {
					return
				}
			}
			if !phrasingElements[n.DataAtom] {
				sb.WriteByte(' ')
				defer sb.WriteByte(' ')
			}
		case html.CommentNode, html.DoctypeNode:
			return
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(root)
	return collapse(sb.String())
}

// hiddenElements are never rendered.
var hiddenElements = map[atom.Atom]bool{atom.Head: true, atom.Script: true, atom.Style: true,
	atom.Noscript: true, atom.Template: true, atom.Title: true}

// phrasingElements flow inline with the text around them: no space is added at their edges.
var phrasingElements = map[atom.Atom]bool{atom.A: true, atom.Abbr: true, atom.B: true,
	atom.Bdi: true, atom.Bdo: true, atom.Cite: true, atom.Code: true, atom.Data: true,
	atom.Dfn: true, atom.Em: true, atom.Font: true, atom.I: true, atom.Kbd: true,
	atom.Label: true, atom.Mark: true, atom.Q: true, atom.S: true, atom.Samp: true,
	atom.Small: true, atom.Span: true, atom.Strong: true, atom.Sub: true, atom.Sup: true,
	atom.Time: true, atom.U: true, atom.Var: true, atom.Ins: true, atom.Del: true}

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
