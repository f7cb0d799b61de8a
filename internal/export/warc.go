package export

import (
	"bufio"
	"bytes"
	"cmp"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/klauspost/compress/gzip"
	"github.com/nlnwa/gowarc"
	"golang.org/x/net/idna"

	"github.com/crawl-project/crawl/storage"
)

// DefaultWARCMaxSize is the size at which WARC files are rotated when WARCOptions.MaxSize is 0:
// 1 GiB, the size the WARC 1.1 standard's annex suggests.
const DefaultWARCMaxSize = 1 << 30

// warcDateLayout is WARC-Date with microseconds, always in UTC.
const warcDateLayout = "2006-01-02T15:04:05.000000Z"

// warcBufferMem is how much of one record gowarc's builder keeps in memory before it spills to
// a temporary file; bodies are capped by the crawl's --max-body, so most never spill.
const warcBufferMem = 32 << 20

// WARCOptions configure NewWARC. A nil *WARCOptions means the zero value.
type WARCOptions struct {
	// MaxSize is the file size in bytes (compressed, on disk) at which a new file is started.
	// Zero or negative means DefaultWARCMaxSize.
	MaxSize int64

	// Date is the WARC-Date of the warcinfo records: when the export ran. Zero means the time
	// NewWARC is called.
	Date time.Time

	// Rand is the randomness for WARC-Record-ID UUIDs (version 4). Nil means crypto/rand;
	// tests pass a seeded reader to get reproducible files.
	Rand io.Reader

	// Software is written to the warcinfo record's "software" field. Empty means "crawl".
	Software string

	// Original returns the stored page of a sequence number (storage.DB.PageMeta has its
	// shape): a 304 that confirms a stored page (storage.Page.RevisitOf) is written as a
	// revisit record whose WARC-Refers-To-Date is that page's fetch time. Nil, or an error,
	// leaves WARC-Refers-To-Date out; WARC-Refers-To-Target-URI is written either way.
	Original func(seq uint64) (*storage.Page, error)

	// Replace lets the series replace existing files of its names (crawl export --force):
	// each file replaces its namesake in one rename when the series is complete, and files
	// of an older, longer series past the new one's last are removed then.
	Replace bool
}

// WARCWriter writes gzip-compressed WARC/1.1 files; see the package documentation for the
// records it writes and how files are named and rotated. It is not safe for concurrent use.
type WARCWriter struct {
	dir, base string
	first     string // the name of the first file when out named it (x.warc.gz); "" for base-00000.warc.gz
	maxSize   int64
	date      time.Time
	rand      io.Reader
	software  string
	original  func(seq uint64) (*storage.Page, error)

	serial  int     // number of the next file
	f       *Output // the current file, under its temporary name until closeFile
	bw      *bufio.Writer
	gz      *gzip.Writer
	size    int64 // bytes written to the current file
	infoEnd int64 // size of the current file right after its warcinfo record
	infoID  string
	done    []*Output // the files finished, still under their temporary names until Close
	files   []string  // the final names of the files finished
	named   int       // how many of files Close has named
	replace bool

	copyBuf []byte
	stats   Stats
	closed  bool
	err     error // sticky: once a file is broken, no more writes
}

// NewWARC starts a WARC export. out is a prefix: files are out-00000.warc.gz, out-00001...; if
// out is an existing directory or ends in a path separator, files are out/crawl-00000.warc.gz,
// ...; if out names a file ending in .warc.gz, the first file is out itself and the ones a
// split adds are x-00001.warc.gz, x-00002... (x being out without .warc.gz). Missing parent directories are created. The first file is created at once (so that a
// bad path fails before any page is read); an export of no pages is one file holding only its
// warcinfo record. An existing file of the series gives an error wrapping ErrOutputExists.
func NewWARC(out string, opts *WARCOptions) (*WARCWriter, error) {
	var o WARCOptions
	if opts != nil {
		o = *opts
	}
	if o.MaxSize <= 0 {
		o.MaxSize = DefaultWARCMaxSize
	}
	if o.Date.IsZero() {
		o.Date = time.Now()
	}
	if o.Rand == nil {
		o.Rand = rand.Reader
	}
	if o.Software == "" {
		o.Software = "crawl"
	}
	if out == "" {
		return nil, errors.New("export: warc: empty output path")
	}
	dir, base := filepath.Dir(out), filepath.Base(out)
	if strings.HasSuffix(out, string(filepath.Separator)) || strings.HasSuffix(out, "/") {
		dir, base = filepath.Clean(out), "crawl"
	} else if fi, err := os.Stat(out); err == nil && fi.IsDir() {
		dir, base = out, "crawl"
	}
	first := ""
	if b, ok := strings.CutSuffix(base, ".warc.gz"); ok && b != "" {
		first, base = base, b
	}
	if err := os.MkdirAll(dir, dirMode); err != nil {
		return nil, fmt.Errorf("export: warc: %w", err)
	}
	gz, err := gzip.NewWriterLevel(nil, gzip.DefaultCompression)
	if err != nil {
		return nil, fmt.Errorf("export: warc: %w", err)
	}
	w := &WARCWriter{
		dir: dir, base: base, first: first,
		maxSize:  o.MaxSize,
		date:     o.Date,
		rand:     o.Rand,
		software: o.Software,
		original: o.Original,
		gz:       gz,
		replace:  o.Replace,
	}
	if err := w.openFile(); err != nil {
		return nil, err
	}
	return w, nil
}

// Files returns the final paths of the files finished so far, in order: they have these names
// once Close returned nil.
func (w *WARCWriter) Files() []string { return slices.Clone(w.files) }

// Stats implements Writer.
func (w *WARCWriter) Stats() Stats { return w.stats }

// Write writes p as a request record and a response record, starting a new file first if the
// pair would take the current one past MaxSize. A 304 confirming a stored page (p.RevisitOf)
// is a revisit record instead of a response, with the profile server-not-modified; a 2xx with
// the same body as a stored page (p.SameAs) one with the profile identical-payload-digest.
//
// A rendered page's DOM (p.Rendered) follows as a conversion record that refers to the
// response (or revisit) record; a sub-resource (p.Subresource) is a pair like any page's,
// counted in Stats.Subresources.
func (w *WARCWriter) Write(p *storage.Page) error {
	if err := w.write(p); err != nil {
		return err
	}
	w.stats.count(p)
	return nil
}

// WriteRobots writes a robots.txt response (storage.DB.RobotsFetches) as a request record and a
// response record, as Write does a page, counted in Stats.Robots rather than Stats.Pages.
func (w *WARCWriter) WriteRobots(p *storage.Page) error {
	if err := w.write(p); err != nil {
		return err
	}
	w.stats.Robots++
	return nil
}

func (w *WARCWriter) write(p *storage.Page) error {
	if w.closed {
		return ErrClosed
	}
	if w.err != nil {
		return w.err
	}
	target := targetURI(pageURL(p))
	reqHead := requestHead(p, target)
	respHead := responseHead(p)
	rendered := p.Render != nil && p.Rendered != nil
	n := len(reqHead) + len(p.ReqBody) + len(respHead) + len(p.Body) + len(target)
	if rendered {
		n += len(p.Rendered) + len(target) + recordBound
	}
	if w.size > w.infoEnd && w.size+pairBound(n) > w.maxSize {
		if err := w.closeFile(); err != nil {
			return w.fail(err)
		}
		if err := w.openFile(); err != nil {
			return w.fail(err)
		}
	}

	reqID, err := w.newID()
	if err != nil {
		return w.fail(err)
	}
	respID, err := w.newID()
	if err != nil {
		return w.fail(err)
	}
	date := p.FetchedAt.UTC().Format(warcDateLayout)
	ip := remoteIP(p.RemoteAddr)
	common := func(rb gowarc.WarcRecordBuilder, id, other string) {
		rb.AddWarcHeader(gowarc.WarcRecordID, "<"+id+">")
		rb.AddWarcHeader(gowarc.WarcDate, date)
		rb.AddWarcHeader(gowarc.WarcTargetURI, target)
		rb.AddWarcHeader(gowarc.WarcWarcinfoID, "<"+w.infoID+">")
		rb.AddWarcHeader(gowarc.WarcConcurrentTo, "<"+other+">")
		if ip != "" {
			rb.AddWarcHeader(gowarc.WarcIPAddress, ip)
		}
	}

	rb := gowarc.NewRecordBuilder(gowarc.Request, recordOptions()...)
	common(rb, reqID, respID)
	rb.AddWarcHeader(gowarc.ContentType, "application/http;msgtype=request")
	_, _ = rb.Write(reqHead) // writes to an in-memory buffer
	_, _ = rb.Write(p.ReqBody)
	req, err := build(rb, p.URL)
	if err != nil {
		return err
	}
	defer func() { _ = req.Close() }()

	if p.RevisitOf != 0 && p.Status == http.StatusNotModified {
		rb = gowarc.NewRecordBuilder(gowarc.Revisit, recordOptions()...)
		common(rb, respID, reqID)
		w.refersTo(rb, p, target)
	} else {
		rb = gowarc.NewRecordBuilder(gowarc.Response, recordOptions()...)
		common(rb, respID, reqID)
	}
	rb.AddWarcHeader(gowarc.ContentType, "application/http;msgtype=response")
	if p.DecodedFrom != "" {
		rb.AddWarcHeader(decodedField, headerValue(p.DecodedFrom))
	}
	if p.Truncated {
		rb.AddWarcHeader(gowarc.WarcTruncated, "length")
	}
	_, _ = rb.Write(respHead)
	if _, err := rb.Write(p.Body); err != nil { // may spill to a temporary file
		_ = rb.Close()
		return fmt.Errorf("export: warc: buffer body of %s: %w", p.URL, err)
	}
	resp, err := build(rb, p.URL)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Close() }()
	if p.SameAs != 0 && p.Status >= 200 && p.Status < 300 {
		// The same payload as an earlier answer: an identical-payload-digest revisit, made by
		// gowarc from the response (its WARC-Payload-Digest kept, the block cut to the header).
		rev, err := resp.ToRevisitRecord(w.revisitRef(gowarc.ProfileIdenticalPayloadDigestV1_1, p.SameAs, target))
		if err != nil {
			return fmt.Errorf("export: warc: revisit record for %s: %w", p.URL, err)
		}
		defer func() { _ = rev.Close() }()
		resp = rev
	}
	spellDecoded(resp)
	recs := []gowarc.WarcRecord{req, resp}
	if rendered {
		conv, err := w.conversion(p, target, respID)
		if err != nil {
			return err
		}
		defer func() { _ = conv.Close() }()
		recs = append(recs, conv)
	}

	// Every record is built (and valid) before any is written, so that a page gowarc
	// rejects leaves no half pair behind.
	for _, rec := range recs {
		if err := w.writeRecord(rec); err != nil {
			return w.fail(err)
		}
	}
	return nil
}

// conversion builds the record of p's rendered DOM: a conversion record (the document as the
// browser transformed it, not something retrieved) with the document's WARC-Target-URI,
// referring to the document's response record respID by WARC-Refers-To. It is dated when the
// document had been read, when rendering began; a render a cap cut says which cap in
// WARC-Crawl-Render-Cut.
func (w *WARCWriter) conversion(p *storage.Page, target, respID string) (gowarc.WarcRecord, error) {
	id, err := w.newID()
	if err != nil {
		return nil, w.fail(err)
	}
	rb := gowarc.NewRecordBuilder(gowarc.Conversion, recordOptions()...)
	rb.AddWarcHeader(gowarc.WarcRecordID, "<"+id+">")
	rb.AddWarcHeader(gowarc.WarcDate, p.FetchedAt.Add(p.Duration).UTC().Format(warcDateLayout))
	rb.AddWarcHeader(gowarc.WarcTargetURI, target)
	rb.AddWarcHeader(gowarc.WarcWarcinfoID, "<"+w.infoID+">")
	rb.AddWarcHeader(gowarc.WarcRefersTo, "<"+respID+">")
	rb.AddWarcHeader(gowarc.ContentType, renderedType)
	if p.Render.Cut != storage.RenderComplete {
		rb.AddWarcHeader(renderCutField, p.Render.Cut.String())
	}
	if _, err := rb.Write(p.Rendered); err != nil {
		_ = rb.Close()
		return nil, fmt.Errorf("export: warc: buffer the rendered DOM of %s: %w", p.URL, err)
	}
	rec, err := build(rb, p.URL)
	if err != nil {
		return nil, err
	}
	spellField(rec, renderCutField)
	return rec, nil
}

// refersTo adds the header fields of a server-not-modified revisit record of p, a 304 that
// confirms the stored page p.RevisitOf of the same URL.
func (w *WARCWriter) refersTo(rb gowarc.WarcRecordBuilder, p *storage.Page, target string) {
	ref := w.revisitRef(gowarc.ProfileServerNotModifiedV1_1, p.RevisitOf, target)
	rb.AddWarcHeader(gowarc.WarcProfile, ref.Profile)
	rb.AddWarcHeader(gowarc.WarcRefersToTargetURI, ref.TargetUri)
	if ref.TargetDate != "" {
		rb.AddWarcHeader(gowarc.WarcRefersToDate, ref.TargetDate)
	}
}

// revisitRef is what a revisit record of profile refers to: the stored page seq of the same
// target, by URI and, when Original finds it, date.
func (w *WARCWriter) revisitRef(profile string, seq uint64, target string) *gowarc.RevisitRef {
	ref := &gowarc.RevisitRef{Profile: profile, TargetUri: target}
	if w.original != nil {
		if o, err := w.original(seq); err == nil {
			ref.TargetDate = o.FetchedAt.UTC().Format(warcDateLayout)
		}
	}
	return ref
}

// Close finishes the current file and gives every file of the series its final name: until
// then each has its temporary name, so that an export killed or stopped part-way leaves no
// file of the series under a final name. If a name cannot be given (it was taken meanwhile),
// the series is withdrawn. It is safe to call more than once.
func (w *WARCWriter) Close() error {
	if w.closed {
		return nil
	}
	w.closed = true
	if err := w.closeFile(); err != nil || w.err != nil {
		w.withdraw()
		return cmp.Or(err, w.err)
	}
	for w.named < len(w.done) {
		if err := w.done[w.named].Rename(); err != nil {
			// Rename removed its temporary file; the final name is another's.
			w.done = slices.Delete(w.done, w.named, w.named+1)
			w.withdraw()
			return fmt.Errorf("export: warc: %w", err)
		}
		w.named++
	}
	if w.replace { // an older series may have had more files
		for s := w.serial; ; s++ {
			if err := os.Remove(filepath.Join(w.dir, w.fileName(s))); err != nil {
				break
			}
		}
	}
	return nil
}

// withdraw ends a failed export: the current file and the finished ones are removed, named or
// not, so that none of the series stays; Files is then empty. It may be called after Close.
func (w *WARCWriter) withdraw() {
	w.closed = true
	if w.f != nil {
		w.f.Abort()
		w.f = nil
	}
	for i, f := range w.done {
		if i < w.named {
			os.Remove(f.Path())
		} else {
			f.Abort()
		}
	}
	w.done, w.files, w.named = nil, nil, 0
	w.stats.Files = 0
}

func (w *WARCWriter) fail(err error) error {
	w.err = err
	return err
}

func recordOptions() []gowarc.WarcRecordOption {
	return []gowarc.WarcRecordOption{
		gowarc.WithVersion(gowarc.V1_1),
		gowarc.WithBufferMaxMemBytes(warcBufferMem),
		gowarc.WithDefaultDigestAlgorithm("sha1"),
		gowarc.WithDefaultDigestEncoding(gowarc.Base32),
	}
}

func (w *WARCWriter) newID() (string, error) {
	u, err := uuid.NewRandomFromReader(w.rand)
	if err != nil {
		return "", fmt.Errorf("export: warc: record id: %w", err)
	}
	return u.URN(), nil
}

// build builds the record: gowarc computes Content-Length and the digests and validates the
// header. A record with validation errors is an error.
func build(rb gowarc.WarcRecordBuilder, what string) (gowarc.WarcRecord, error) {
	rec, v, err := rb.Build()
	if err == nil && v != nil && !v.Valid() {
		err = v
	}
	if err != nil {
		if rec != nil {
			_ = rec.Close()
		} else {
			_ = rb.Close()
		}
		return nil, fmt.Errorf("export: warc: build %s record for %s: %w", recordType(rec), what, err)
	}
	return rec, nil
}

// writeRecord appends rec to the current file as one gzip member.
func (w *WARCWriter) writeRecord(rec gowarc.WarcRecord) error {
	cw := &countWriter{w: w.bw}
	w.gz.Reset(cw)
	if err := w.marshal(rec); err != nil {
		return fmt.Errorf("export: warc: write %s: %w", w.f.Path(), err)
	}
	if err := w.gz.Close(); err != nil {
		return fmt.Errorf("export: warc: write %s: %w", w.f.Path(), err)
	}
	w.size += cw.n
	w.stats.Bytes += cw.n
	return nil
}

// marshal writes rec to the gzip member: what gowarc's Marshaler writes (version line, header
// fields serialized by gowarc, CRLF, block, CRLF CRLF), but copying the block through a reused
// buffer; the Marshaler's io.Copy allocates 32 KiB per record.
func (w *WARCWriter) marshal(rec gowarc.WarcRecord) error {
	if _, err := io.WriteString(w.gz, rec.Version().String()+"\r\n"); err != nil {
		return err
	}
	if _, err := rec.WarcHeader().Write(w.gz); err != nil {
		return err
	}
	if _, err := io.WriteString(w.gz, "\r\n"); err != nil {
		return err
	}
	block, err := rec.Block().RawBytes()
	if err != nil {
		return err
	}
	if w.copyBuf == nil {
		w.copyBuf = make([]byte, 32<<10)
	}
	// Hide WriterTo so that CopyBuffer uses copyBuf.
	if _, err := io.CopyBuffer(w.gz, struct{ io.Reader }{block}, w.copyBuf); err != nil {
		return err
	}
	_, err = io.WriteString(w.gz, "\r\n\r\n")
	return err
}

// decodedField names the Content-Encoding the crawler removed from a response's body.
const decodedField = "WARC-Crawl-Decoded"

// renderCutField names the cap that cut the render of a rendered DOM's page.
const renderCutField = "WARC-Crawl-Render-Cut"

// spellDecoded writes decodedField as spelled, where gowarc has put a field it does not know
// in Go's canonical form (Warc-Crawl-Decoded).
func spellDecoded(rec gowarc.WarcRecord) { spellField(rec, decodedField) }

// spellField writes the field name as spelled, where gowarc has put it in Go's canonical form.
func spellField(rec gowarc.WarcRecord, name string) {
	for _, f := range *rec.WarcHeader() {
		if strings.EqualFold(f.Name, name) {
			f.Name = name
		}
	}
}

func recordType(rec gowarc.WarcRecord) string {
	if rec == nil {
		return "WARC"
	}
	return rec.Type().String()
}

// openFile creates the next file of the series and writes its warcinfo record.
func (w *WARCWriter) openFile() error {
	name := w.fileName(w.serial)
	path := filepath.Join(w.dir, name)
	create := CreateOutput
	if w.replace {
		create = ReplaceOutput
	}
	f, err := create(path)
	if err != nil {
		return fmt.Errorf("export: warc: %w", err)
	}
	w.serial++
	w.f, w.size, w.infoEnd = f, 0, 0
	if w.bw == nil {
		w.bw = bufio.NewWriterSize(f, 256<<10)
	} else {
		w.bw.Reset(f)
	}
	w.stats.Files++

	id, err := w.newID()
	if err != nil {
		return err
	}
	rb := gowarc.NewRecordBuilder(gowarc.Warcinfo, recordOptions()...)
	rb.AddWarcHeader(gowarc.WarcRecordID, "<"+id+">")
	rb.AddWarcHeader(gowarc.WarcDate, w.date.UTC().Format(warcDateLayout))
	rb.AddWarcHeader(gowarc.WarcFilename, name)
	rb.AddWarcHeader(gowarc.ContentType, gowarc.ApplicationWarcFields)
	fmt.Fprintf(rb, "software: %s\r\n", headerValue(w.software))
	fmt.Fprintf(rb, "format: WARC File Format 1.1\r\n")
	fmt.Fprintf(rb, "conformsTo: https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/\r\n")
	fmt.Fprintf(rb, "description: exported from a crawl store; bodies are stored decoded: a removed Content-Encoding is named in WARC-Crawl-Decoded, Content-Length is the decoded length\r\n")
	info, err := build(rb, name)
	if err != nil {
		return err
	}
	defer func() { _ = info.Close() }()
	if err := w.writeRecord(info); err != nil {
		return err
	}
	w.infoID, w.infoEnd = id, w.size
	return nil
}

// fileName is the name of the file serial of the series.
func (w *WARCWriter) fileName(serial int) string {
	if serial == 0 && w.first != "" {
		return w.first
	}
	return fmt.Sprintf("%s-%05d.warc.gz", w.base, serial)
}

// closeFile finishes the current file, which keeps its temporary name until Close.
func (w *WARCWriter) closeFile() error {
	if w.f == nil {
		return nil
	}
	f := w.f
	w.f = nil
	if w.err != nil { // a record may be cut short: the file never gets its name
		f.Abort()
		w.stats.Files--
		return nil
	}
	err := w.bw.Flush()
	if err != nil {
		f.Abort()
	} else {
		err = f.Finish()
	}
	if err != nil {
		w.stats.Files--
		return fmt.Errorf("export: warc: close %s: %w", f.Path(), err)
	}
	w.done = append(w.done, f)
	w.files = append(w.files, f.Path())
	return nil
}

// pairBound is an upper bound of the compressed size of a request+response pair whose HTTP
// parts and target URI add up to n bytes: deflate never grows data by more than 5 bytes per
// 16 KiB stored block, gzip adds 18 bytes per member, and a WARC header of this package is
// well under 1 KiB plus the target URI (counted in n).
func pairBound(n int) int64 {
	return int64(n) + int64(n/16384+1)*5*2 + 2*recordBound
}

// recordBound bounds what a record of this package adds to its parts once compressed: its
// WARC header, the target URI apart, and its gzip member's framing.
const recordBound = 1024 + 18 + 64

// requestHead is the request as sent: request line, Host, the stored request headers, and
// the Content-Length of its body (ReqBody, which follows it in the record) if it has one.
func requestHead(p *storage.Page, target string) []byte {
	method := p.ReqMethod
	if method == "" {
		method = http.MethodGet
	}
	reqURI, host := "/", ""
	if u, err := url.Parse(target); err == nil {
		reqURI, host = u.RequestURI(), u.Host
	}
	var b bytes.Buffer
	b.WriteString(headerValue(method))
	b.WriteByte(' ')
	b.WriteString(reqURI)
	b.WriteString(" HTTP/1.1\r\n")
	if p.ReqHeader.Get("Host") == "" && host != "" {
		b.WriteString("Host: " + host + "\r\n")
	}
	writeHeader(&b, p.ReqHeader, nil)
	if len(p.ReqBody) > 0 && p.ReqHeader.Get("Content-Length") == "" {
		b.WriteString("Content-Length: " + strconv.Itoa(len(p.ReqBody)) + "\r\n")
	}
	b.WriteString("\r\n")
	return b.Bytes()
}

// responseHead is the status line and headers as received, corrected for the decoded body.
func responseHead(p *storage.Page) []byte {
	proto := p.Proto
	if !strings.HasPrefix(proto, "HTTP/") {
		proto = "HTTP/1.1"
	}
	line := headerValue(p.StatusLine)
	if !strings.HasPrefix(line, "HTTP/") {
		line = proto + " " + strconv.Itoa(p.Status) + " " + http.StatusText(p.Status)
	}
	var b bytes.Buffer
	b.WriteString(strings.TrimRight(line, " "))
	b.WriteString("\r\n")
	skip := map[string]bool{"Transfer-Encoding": true, "Content-Length": true}
	if p.DecodedFrom != "" {
		skip["Content-Encoding"] = true
	}
	writeHeader(&b, p.Header, skip)
	b.WriteString("Content-Length: " + strconv.Itoa(len(p.Body)) + "\r\n\r\n")
	return b.Bytes()
}

// writeHeader writes h sorted by name, one line per value, leaving out the canonical names in
// skip.
func writeHeader(b *bytes.Buffer, h http.Header, skip map[string]bool) {
	keys := make([]string, 0, len(h))
	for k := range h {
		if validFieldName(k) && !skip[http.CanonicalHeaderKey(k)] {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		for _, v := range h[k] {
			b.WriteString(k)
			b.WriteString(": ")
			b.WriteString(headerValue(v))
			b.WriteString("\r\n")
		}
	}
}

// validFieldName reports whether k is an RFC 9110 token, so that the header parses.
func validFieldName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// headerValue replaces the bytes that would end or corrupt a header line (CR, LF, NUL) with
// spaces.
func headerValue(s string) string {
	if !strings.ContainsAny(s, "\r\n\x00") {
		return s
	}
	return strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' || r == 0 {
			return ' '
		}
		return r
	}, s)
}

// remoteIP returns the IP of an "IP:port" (or bare IP) address, "" if there is none.
func remoteIP(addr string) string {
	if addr == "" {
		return ""
	}
	host := addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		host = h
	}
	if ip := net.ParseIP(host); ip != nil {
		return ip.String()
	}
	return ""
}

// targetURI is s as an RFC 3986 URI: an internationalized host in punycode, non-ASCII and other
// bytes not allowed in a URI percent-encoded. Stored URLs are normalized already, so this
// usually returns s unchanged.
func targetURI(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return escapeNonURI(s)
	}
	if h := u.Hostname(); strings.Contains(h, "%") {
		// An IPv6 zone (fe80::1%eth0) means nothing off the crawling machine, and WARC readers
		// parse URIs the WHATWG way, which has no zones: drop it.
		h, _, _ = strings.Cut(h, "%")
		port := u.Port()
		u.Host = "[" + h + "]"
		if port != "" {
			u.Host += ":" + port
		}
	}
	if host := u.Hostname(); !isASCII(host) {
		if a, err := idna.Lookup.ToASCII(host); err == nil {
			if port := u.Port(); port != "" {
				a += ":" + port
			}
			u.Host = a
		}
	}
	return escapeNonURI(u.String())
}

// escapeNonURI percent-encodes bytes that may not appear in a URI: controls, space, non-ASCII
// and a few ASCII characters (", <, >, \, ^, `, {, |, }).
func escapeNonURI(s string) string {
	const hex = "0123456789ABCDEF"
	bad := func(c byte) bool { return c <= ' ' || c >= 0x7f || strings.IndexByte("\"<>\\^`{|}", c) >= 0 }
	first := -1
	for i := 0; i < len(s); i++ {
		if bad(s[i]) {
			first = i
			break
		}
	}
	if first < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:first])
	for i := first; i < len(s); i++ {
		if c := s[i]; bad(c) {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// countWriter counts the bytes written through it.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
