package export

import (
	"bufio"
	"encoding/csv"
	"fmt"
	"io"

	"github.com/crawl-project/crawl/storage"
)

// CSVOptions configure NewCSV. A nil *CSVOptions means the zero value.
type CSVOptions struct {
	// Full, if set, is called for an HTML page that comes without its body (Page.Body nil, as
	// from storage.DB.PagesMeta) to read it whole, body and rendered DOM (storage.DB.Page).
	// Without it such a page's fields are all empty.
	Full func(p *storage.Page) (*storage.Page, error)
}

// CSVWriter writes one row per HTML page (text/html, application/xhtml+xml): its URL, then
// the value of each field, read in the rendered DOM of a rendered page (RFC 4180 through encoding/csv, after a header row of "url" and the
// field names). Other pages get no row; Stats counts them as Omitted. Fed each URL's newest
// visit (Newest), as crawl export feeds it, it writes one row per URL. A field that matched
// nothing is an empty cell; an array field (NAME[]) is a JSON array of strings. It is not safe
// for concurrent use.
type CSVWriter struct {
	bw     *bufio.Writer
	cw     *countWriter
	csv    *csv.Writer
	fields []Field
	opts   CSVOptions
	stats  Stats
	closed bool
}

// NewCSV returns a writer of CSV rows to w, having buffered the header row. Close flushes but
// does not close w. A field named "url" is an error wrapping ErrBadField (the first column).
func NewCSV(w io.Writer, fields []Field, opts *CSVOptions) (*CSVWriter, error) {
	header := []string{"url"}
	for _, f := range fields {
		if f.Name == "url" {
			return nil, fmt.Errorf("%w: %q: the name url is the first column of the CSV", ErrBadField, f.Name+"="+f.Selector)
		}
		header = append(header, f.Name)
	}
	var o CSVOptions
	if opts != nil {
		o = *opts
	}
	cw := &countWriter{w: w}
	bw := bufio.NewWriterSize(cw, 256<<10)
	c := &CSVWriter{bw: bw, cw: cw, csv: csv.NewWriter(bw), fields: fields, opts: o, stats: Stats{Files: 1}}
	if err := c.csv.Write(header); err != nil {
		return nil, fmt.Errorf("export: csv: %w", err)
	}
	return c, nil
}

// Write writes p's row if p is an HTML page, else counts it as Omitted.
func (c *CSVWriter) Write(p *storage.Page) error {
	if c.closed {
		return ErrClosed
	}
	if !isHTMLType(p.ContentType) {
		c.stats.Omitted++
		return nil
	}
	full := p
	if p.Body == nil && c.opts.Full != nil {
		f, err := c.opts.Full(p)
		if err != nil {
			return fmt.Errorf("export: csv: %s: %w", p.URL, err)
		}
		full = f
	}
	d := readDoc(full, newHTMLDecoder(full.Body, p.Header.Get("Content-Type")))
	root := d.root()
	if p.Render != nil && full.Rendered == nil {
		root = nil // a rendered page read without its DOM: its fields are not the body's
	}
	cells, err := extractFields(c.fields, root).cells()
	if err != nil {
		return fmt.Errorf("export: csv: %s: %w", p.URL, err)
	}
	if d.flattenedAt > 0 {
		c.stats.flattened(p.URL)
	}
	if err := c.csv.Write(append([]string{p.URL}, cells...)); err != nil {
		return fmt.Errorf("export: csv: %s: %w", p.URL, err)
	}
	c.stats.count(p)
	c.csv.Flush() // into bw, which buffers; Bytes then counts the row
	c.stats.Bytes = c.cw.n + int64(c.bw.Buffered())
	return c.csv.Error()
}

// Close flushes the buffered rows. It is safe to call more than once.
func (c *CSVWriter) Close() error {
	if c.closed {
		return nil
	}
	c.closed = true
	c.csv.Flush()
	if err := c.csv.Error(); err != nil {
		return fmt.Errorf("export: csv: %w", err)
	}
	if err := c.bw.Flush(); err != nil {
		return fmt.Errorf("export: csv: %w", err)
	}
	c.stats.Bytes = c.cw.n
	return nil
}

// Stats implements Writer.
func (c *CSVWriter) Stats() Stats { return c.stats }
