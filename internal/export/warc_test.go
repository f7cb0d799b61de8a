package export

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha1"
	"encoding/base32"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nlnwa/gowarc"

	"github.com/crawl-project/crawl/storage"
)

// rawRecord is a WARC record as parsed by the small independent parser below, which shares no
// code with gowarc or with the writer.
type rawRecord struct {
	fields [][2]string
	block  []byte
}

func (r rawRecord) get(name string) string {
	for _, f := range r.fields {
		if strings.EqualFold(f[0], name) {
			return f[1]
		}
	}
	return ""
}

func (r rawRecord) count(name string) int {
	n := 0
	for _, f := range r.fields {
		if strings.EqualFold(f[0], name) {
			n++
		}
	}
	return n
}

// readRawWARC reads a .warc.gz file with the standard library's gzip, one member at a time,
// and checks that every member holds exactly one well-formed WARC/1.1 record.
func readRawWARC(t *testing.T, path string) []rawRecord {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	br := bufio.NewReader(f)
	zr, err := gzip.NewReader(br)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var recs []rawRecord
	for i := 0; ; i++ {
		zr.Multistream(false)
		data, err := io.ReadAll(zr)
		if err != nil {
			t.Fatalf("%s: member %d: %v", path, i, err)
		}
		rec, rest, err := parseRawRecord(data)
		if err != nil {
			t.Fatalf("%s: member %d: %v", path, i, err)
		}
		if len(rest) != 0 {
			t.Fatalf("%s: member %d: %d bytes after the record", path, i, len(rest))
		}
		recs = append(recs, rec)
		if err := zr.Reset(br); err == io.EOF {
			return recs
		} else if err != nil {
			t.Fatalf("%s: member %d: %v", path, i+1, err)
		}
	}
}

func parseRawRecord(data []byte) (rawRecord, []byte, error) {
	var rec rawRecord
	const version = "WARC/1.1\r\n"
	if !bytes.HasPrefix(data, []byte(version)) {
		return rec, nil, fmt.Errorf("no %q line", strings.TrimSpace(version))
	}
	data = data[len(version):]
	end := bytes.Index(data, []byte("\r\n\r\n"))
	if end < 0 {
		return rec, nil, errors.New("no end of WARC header")
	}
	for line := range strings.SplitSeq(string(data[:end]), "\r\n") {
		name, value, ok := strings.Cut(line, ":")
		if !ok || strings.ContainsAny(line, "\n\r") {
			return rec, nil, fmt.Errorf("bad header line %q", line)
		}
		rec.fields = append(rec.fields, [2]string{name, strings.TrimSpace(value)})
	}
	data = data[end+4:]
	n, err := strconv.Atoi(rec.get("Content-Length"))
	if err != nil || n < 0 || n > len(data) {
		return rec, nil, fmt.Errorf("bad Content-Length %q (have %d bytes)", rec.get("Content-Length"), len(data))
	}
	rec.block = data[:n]
	if !bytes.HasPrefix(data[n:], []byte("\r\n\r\n")) {
		return rec, nil, errors.New("no CRLFCRLF after block")
	}
	return rec, data[n+4:], nil
}

func sha1B32(b []byte) string {
	s := sha1.Sum(b)
	return "sha1:" + base32.StdEncoding.EncodeToString(s[:])
}

// httpPayload splits an HTTP message block into head and payload.
func httpPayload(block []byte) (head string, payload []byte) {
	i := bytes.Index(block, []byte("\r\n\r\n"))
	if i < 0 {
		return string(block), nil
	}
	return string(block[:i+4]), block[i+4:]
}

func writeWARC(t *testing.T, out string, pages []*storage.Page, maxSize int64) *WARCWriter {
	t.Helper()
	w, err := NewWARC(out, &WARCOptions{MaxSize: maxSize, Date: baseTime.Add(time.Hour), Rand: seededReader(testSeed)})
	if err != nil {
		t.Fatal(err)
	}
	st, err := Run(context.Background(), sliceSource(pages), w, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.Pages != int64(len(pages)) || st.Files != len(w.Files()) {
		t.Fatalf("stats %+v, want %d pages in %d files", st, len(pages), len(w.Files()))
	}
	return w
}

func TestWARCRoundTrip(t *testing.T) {
	pages := syntheticPages()
	w := writeWARC(t, filepath.Join(t.TempDir(), "out", "crawl"), pages, 0)
	files := w.Files()
	if len(files) != 1 || filepath.Base(files[0]) != "crawl-00000.warc.gz" {
		t.Fatalf("files = %v, want one crawl-00000.warc.gz", files)
	}
	recs := readRawWARC(t, files[0])
	if len(recs) != 1+2*len(pages) {
		t.Fatalf("%d records, want %d", len(recs), 1+2*len(pages))
	}

	info := recs[0]
	if info.get("WARC-Type") != "warcinfo" || info.get("WARC-Filename") != "crawl-00000.warc.gz" ||
		info.get("Content-Type") != "application/warc-fields" || info.get("WARC-Date") != "2024-05-01T13:30:45.123456Z" {
		t.Errorf("warcinfo header = %v", info.fields)
	}
	if !bytes.Contains(info.block, []byte("format: WARC File Format 1.1\r\n")) {
		t.Errorf("warcinfo block = %q", info.block)
	}
	infoID := info.get("WARC-Record-ID")

	ids := map[string]bool{infoID: true}
	for i, p := range pages {
		req, resp := recs[1+2*i], recs[2+2*i]
		t.Run(fmt.Sprintf("%d_%d", i, p.Status), func(t *testing.T) {
			for _, r := range []rawRecord{req, resp} {
				id := r.get("WARC-Record-ID")
				if !strings.HasPrefix(id, "<urn:uuid:") || ids[id] {
					t.Errorf("record id %q not a fresh urn:uuid", id)
				}
				ids[id] = true
				if got := r.get("WARC-Target-URI"); got != targetURI(p.FinalURL) {
					t.Errorf("target %q, want %q", got, targetURI(p.FinalURL))
				}
				if strings.ContainsFunc(r.get("WARC-Target-URI"), func(c rune) bool { return c > 0x7e || c <= ' ' }) {
					t.Errorf("target %q is not an ASCII URI", r.get("WARC-Target-URI"))
				}
				if got, want := r.get("WARC-Date"), p.FetchedAt.UTC().Format("2006-01-02T15:04:05.000000Z"); got != want {
					t.Errorf("WARC-Date %q, want %q", got, want)
				}
				if r.get("WARC-Warcinfo-ID") != infoID {
					t.Errorf("WARC-Warcinfo-ID %q, want %q", r.get("WARC-Warcinfo-ID"), infoID)
				}
				if got := r.get("WARC-Block-Digest"); got != sha1B32(r.block) {
					t.Errorf("block digest %s, recomputed %s", got, sha1B32(r.block))
				}
				_, payload := httpPayload(r.block)
				if got := r.get("WARC-Payload-Digest"); got != sha1B32(payload) {
					t.Errorf("payload digest %s, recomputed %s", got, sha1B32(payload))
				}
				if r.count("WARC-Concurrent-To") != 1 {
					t.Errorf("%d WARC-Concurrent-To fields", r.count("WARC-Concurrent-To"))
				}
			}
			if req.get("WARC-Type") != "request" || resp.get("WARC-Type") != "response" {
				t.Fatalf("types %q, %q", req.get("WARC-Type"), resp.get("WARC-Type"))
			}
			if req.get("WARC-Concurrent-To") != resp.get("WARC-Record-ID") || resp.get("WARC-Concurrent-To") != req.get("WARC-Record-ID") {
				t.Error("request and response do not point at each other")
			}
			if req.get("Content-Type") != "application/http;msgtype=request" || resp.get("Content-Type") != "application/http;msgtype=response" {
				t.Errorf("content types %q, %q", req.get("Content-Type"), resp.get("Content-Type"))
			}

			// Request: request line, Host, headers as sent.
			reqHead, reqBody := httpPayload(req.block)
			hreq, err := http.ReadRequest(bufio.NewReader(strings.NewReader(reqHead)))
			if err != nil {
				t.Fatalf("request block: %v\n%s", err, reqHead)
			}
			if hreq.Proto != "HTTP/1.1" || hreq.Method != "GET" || len(reqBody) != 0 {
				t.Errorf("request line %s %s %s", hreq.Method, hreq.RequestURI, hreq.Proto)
			}
			if want := mustParse(t, targetURI(p.FinalURL)); hreq.RequestURI != want.RequestURI() || hreq.Host != want.Host {
				t.Errorf("request %s Host %s, want %s Host %s", hreq.RequestURI, hreq.Host, want.RequestURI(), want.Host)
			}
			if hreq.Header.Get("User-Agent") != p.ReqHeader.Get("User-Agent") {
				t.Errorf("User-Agent %q", hreq.Header.Get("User-Agent"))
			}

			// Response: status line as received, headers fixed for the decoded body.
			head, payload := httpPayload(resp.block)
			if !bytes.Equal(payload, p.Body) {
				t.Errorf("payload (%d bytes) != stored body (%d bytes)", len(payload), len(p.Body))
			}
			line, _, _ := strings.Cut(head, "\r\n")
			wantLine := p.StatusLine
			if wantLine == "" {
				wantLine = fmt.Sprintf("HTTP/1.1 %d %s", p.Status, http.StatusText(p.Status))
			}
			if line != wantLine {
				t.Errorf("status line %q, want %q", line, wantLine)
			}
			hresp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(head)), nil)
			if err != nil {
				t.Fatalf("response block: %v\n%s", err, head)
			}
			if hresp.StatusCode != p.Status {
				t.Errorf("status %d, want %d", hresp.StatusCode, p.Status)
			}
			if got := hresp.Header.Values("Content-Length"); len(got) != 1 || got[0] != strconv.Itoa(len(p.Body)) {
				t.Errorf("Content-Length %v, want %d", got, len(p.Body))
			}
			if hresp.Header.Get("Transfer-Encoding") != "" || len(hresp.TransferEncoding) > 0 {
				t.Error("Transfer-Encoding kept")
			}
			if p.DecodedFrom != "" {
				if hresp.Header.Get("Content-Encoding") != "" || resp.get("WARC-Crawl-Decoded") != p.DecodedFrom {
					t.Errorf("Content-Encoding %q, WARC-Crawl-Decoded %q", hresp.Header.Get("Content-Encoding"), resp.get("WARC-Crawl-Decoded"))
				}
			} else if resp.get("WARC-Crawl-Decoded") != "" {
				t.Error("WARC-Crawl-Decoded on a body that was not decoded")
			}
			for k, vs := range p.Header {
				switch k {
				case "Content-Length", "Transfer-Encoding", "Content-Encoding":
					continue
				}
				if got := hresp.Header.Values(k); len(got) != len(vs) {
					t.Errorf("header %s = %q, want %q", k, got, vs)
				}
			}
			if strings.Contains(head, "\r\nInjected:") {
				t.Error("a CRLF in a header value started a new header line")
			}
			if got := resp.get("WARC-Truncated"); (got == "length") != p.Truncated || got != "" && got != "length" {
				t.Errorf("WARC-Truncated %q, page truncated %v", got, p.Truncated)
			}
			if got, want := resp.get("WARC-IP-Address"), remoteIP(p.RemoteAddr); got != want || req.get("WARC-IP-Address") != want {
				t.Errorf("WARC-IP-Address %q, want %q", got, want)
			}
		})
	}
	checkWithGowarc(t, files[0], pages)
}

// checkWithGowarc reads the file with gowarc's reader under strict validation (any syntax,
// specification, digest or HTTP block error fails) and compares what it parses to the pages.
func checkWithGowarc(t *testing.T, path string, pages []*storage.Page) {
	t.Helper()
	r, err := gowarc.NewWarcFileReader(path, 0, gowarc.WithStrictValidation(), gowarc.WithBlockErrorPolicy(gowarc.ErrFail))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	n := 0
	for {
		rec, off, v, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("gowarc: record %d at %d: %v", n, off, err)
		}
		if !v.Valid() {
			t.Fatalf("gowarc: record %d at %d: %v", n, off, v)
		}
		if n == 0 {
			if rec.Type() != gowarc.Warcinfo {
				t.Fatalf("gowarc: first record is %v", rec.Type())
			}
			n++
			continue
		}
		p := pages[(n-1)/2]
		switch blk := rec.Block().(type) {
		case gowarc.HttpRequestBlock:
			if rec.Type() != gowarc.Request || n%2 != 1 {
				t.Errorf("gowarc: record %d: unexpected request", n)
			}
		case gowarc.HttpResponseBlock:
			if rec.Type() != gowarc.Response || n%2 != 0 {
				t.Errorf("gowarc: record %d: unexpected response", n)
			}
			if blk.HttpStatusCode() != p.Status {
				t.Errorf("gowarc: %s: status %d, want %d", p.URL, blk.HttpStatusCode(), p.Status)
			}
			pr, err := blk.PayloadBytes()
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(pr)
			if err != nil || !bytes.Equal(body, p.Body) {
				t.Errorf("gowarc: %s: payload differs from the stored body (%v)", p.URL, err)
			}
			if blk.PayloadDigest() != rec.WarcHeader().Get(gowarc.WarcPayloadDigest) {
				t.Errorf("gowarc: %s: payload digest %s, header %s", p.URL, blk.PayloadDigest(), rec.WarcHeader().Get(gowarc.WarcPayloadDigest))
			}
		default:
			t.Errorf("gowarc: record %d: block %T", n, blk)
		}
		if got := rec.WarcHeader().Get(gowarc.WarcTargetURI); got != targetURI(p.FinalURL) {
			t.Errorf("gowarc: target %q", got)
		}
		n++
	}
	if n != 1+2*len(pages) {
		t.Errorf("gowarc read %d records, want %d", n, 1+2*len(pages))
	}
}

// TestWARCCheckersCatchCorruption makes sure the checks above can fail: a record whose body
// no longer matches its digests is reported by both the independent parser's digest
// comparison and gowarc's strict reader.
func TestWARCCheckersCatchCorruption(t *testing.T) {
	pages := syntheticPages()[:1]
	w := writeWARC(t, filepath.Join(t.TempDir(), "c"), pages, 0)
	recs := readRawWARC(t, w.Files()[0])
	resp := recs[2]
	i := bytes.Index(resp.block, []byte("héllo"))
	resp.block[i] ^= 0x20 // same length, different payload
	if resp.get("WARC-Block-Digest") == sha1B32(resp.block) {
		t.Fatal("independent check: block digest still matches a corrupted block")
	}

	// Re-serialize the corrupted record uncompressed and feed it to gowarc.
	var buf bytes.Buffer
	buf.WriteString("WARC/1.1\r\n")
	for _, f := range resp.fields {
		buf.WriteString(f[0] + ": " + f[1] + "\r\n")
	}
	buf.WriteString("\r\n")
	buf.Write(resp.block)
	buf.WriteString("\r\n\r\n")
	path := filepath.Join(t.TempDir(), "corrupt.warc")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := gowarc.NewWarcFileReader(path, 0, gowarc.WithStrictValidation())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, _, _, err := r.Next(); err == nil || !strings.Contains(err.Error(), "digest") {
		t.Fatalf("gowarc strict reader on a corrupted record: err = %v, want a digest error", err)
	}
	// The uncorrupted original passes the same reader.
	resp.block[i] ^= 0x20
	checkWithGowarc(t, w.Files()[0], pages)
}

func TestWARCRotation(t *testing.T) {
	const maxSize = 16 << 10
	pages := make([]*storage.Page, 0, 40)
	for _, p := range syntheticPages() {
		if len(p.Body) < maxSize/2 {
			pages = append(pages, p)
		}
	}
	rnd := seededReader(7)
	for i := range 30 {
		body := make([]byte, 1500+i*37) // incompressible, so that files really fill up
		_, _ = io.ReadFull(rnd, body)
		pages = append(pages, &storage.Page{
			URL: fmt.Sprintf("http://r.example/%d", i), FinalURL: fmt.Sprintf("http://r.example/%d", i),
			Status: 200, StatusLine: "HTTP/1.1 200 OK", Proto: "HTTP/1.1", ContentType: "application/octet-stream",
			Header:    http.Header{"Content-Type": {"application/octet-stream"}},
			FetchedAt: baseTime.Add(time.Duration(i) * time.Minute), Body: body,
		})
	}
	huge := make([]byte, 3*maxSize)
	_, _ = io.ReadFull(rnd, huge)
	pages = append(pages, &storage.Page{URL: "http://r.example/huge", FinalURL: "http://r.example/huge", Status: 200,
		FetchedAt: baseTime, Body: huge}, &storage.Page{URL: "http://r.example/after", FinalURL: "http://r.example/after",
		Status: 200, FetchedAt: baseTime, Body: []byte("after")})

	dir := t.TempDir() + string(filepath.Separator)
	w := writeWARC(t, dir, pages, maxSize)
	files := w.Files()
	if len(files) < 4 {
		t.Fatalf("%d files, want rotation into at least 4", len(files))
	}
	var got []string
	for i, f := range files {
		if want := fmt.Sprintf("crawl-%05d.warc.gz", i); filepath.Base(f) != want || filepath.Dir(f) != filepath.Clean(dir) {
			t.Errorf("file %d is %s, want %s in %s", i, f, want, dir)
		}
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		recs := readRawWARC(t, f)
		if recs[0].get("WARC-Type") != "warcinfo" || recs[0].get("WARC-Filename") != filepath.Base(f) {
			t.Errorf("%s does not start with its warcinfo record", f)
		}
		if (len(recs)-1)%2 != 0 || len(recs) < 3 {
			t.Errorf("%s: %d records: a request/response pair was split or the file is empty", f, len(recs))
		}
		holdsHuge := false
		for j := 1; j < len(recs); j += 2 {
			if recs[j].get("WARC-Concurrent-To") != recs[j+1].get("WARC-Record-ID") {
				t.Errorf("%s: records %d/%d are not a pair", f, j, j+1)
			}
			if recs[j].get("WARC-Warcinfo-ID") != recs[0].get("WARC-Record-ID") {
				t.Errorf("%s: record %d points at another file's warcinfo", f, j)
			}
			got = append(got, recs[j].get("WARC-Target-URI"))
			holdsHuge = holdsHuge || strings.HasSuffix(recs[j].get("WARC-Target-URI"), "/huge")
		}
		if fi.Size() > maxSize && !(holdsHuge && len(recs) == 3) {
			t.Errorf("%s is %d bytes, over the %d limit without being a single oversized page", f, fi.Size(), maxSize)
		}
	}
	if len(got) != len(pages) {
		t.Fatalf("%d pages across files, want %d", len(got), len(pages))
	}
	for i, p := range pages {
		if got[i] != targetURI(p.FinalURL) {
			t.Errorf("page %d is %s, want %s (order lost)", i, got[i], p.FinalURL)
		}
	}

	// A second export to the same place refuses to overwrite.
	if _, err := NewWARC(dir, nil); !errors.Is(err, ErrOutputExists) {
		t.Errorf("second export: err = %v, want ErrOutputExists", err)
	}
}

func TestWARCEmptyExport(t *testing.T) {
	w := writeWARC(t, filepath.Join(t.TempDir(), "empty"), nil, 0)
	recs := readRawWARC(t, w.Files()[0])
	if len(recs) != 1 || recs[0].get("WARC-Type") != "warcinfo" {
		t.Fatalf("empty export: %d records", len(recs))
	}
	checkWithGowarc(t, w.Files()[0], nil)
	if err := w.Write(syntheticPages()[0]); !errors.Is(err, ErrClosed) {
		t.Errorf("Write after Close: %v, want ErrClosed", err)
	}
}

// TestWARCDeterministic: the same pages, seed and date give byte-identical files.
func TestWARCDeterministic(t *testing.T) {
	a := writeWARC(t, filepath.Join(t.TempDir(), "x"), syntheticPages(), 0)
	b := writeWARC(t, filepath.Join(t.TempDir(), "x"), syntheticPages(), 0)
	da, _ := os.ReadFile(a.Files()[0])
	db, _ := os.ReadFile(b.Files()[0])
	if !bytes.Equal(da, db) {
		t.Error("two exports of the same pages with the same seed differ")
	}
}

func TestTargetURI(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"http://a.example/x?y=1", "http://a.example/x?y=1"},
		{"http://bücher.example/größe", "http://xn--bcher-kva.example/gr%C3%B6%C3%9Fe"},
		{"http://bücher.example:8080/", "http://xn--bcher-kva.example:8080/"},
		{"http://a.example/a b", "http://a.example/a%20b"},
		{"http://a.example/%zz|", "http://a.example/%zz%7C"},
		{"http://[fe80::1%25eth0]:8080/x", "http://[fe80::1]:8080/x"},
		{"http://[::1]/x", "http://[::1]/x"},
	} {
		if got := targetURI(tc.in); got != tc.want {
			t.Errorf("targetURI(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func mustParse(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestWARCHostileURLs: every URL of the mirror's hostile list (and raw, unnormalized ones)
// still gives records that gowarc accepts under strict validation.
func TestWARCHostileURLs(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "export", "hostile_urls.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var urls []string
	for l := range strings.SplitSeq(string(data), "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			urls = append(urls, l)
		}
	}
	urls = append(urls, "http://h.example/"+strings.Repeat("ü", 500), "http://h.example/a b\t|{}^`", "http://h.example/%zz%", "http://[fe80::1%25eth0]:8080/x")
	pages := mirrorPages(urls...)
	pages[0].RemoteAddr = "[fe80::1%eth0]:80" // zone: not an IP WARC-IP-Address accepts
	w := writeWARC(t, filepath.Join(t.TempDir(), "h"), pages, 0)
	recs := readRawWARC(t, w.Files()[0])
	if len(recs) != 1+2*len(pages) {
		t.Fatalf("%d records for %d pages", len(recs), len(pages))
	}
	for _, r := range recs[1:] {
		if u := r.get("WARC-Target-URI"); strings.ContainsFunc(u, func(c rune) bool { return c > 0x7e || c <= ' ' }) {
			t.Errorf("target %q is not an ASCII URI", u)
		}
	}
	checkWithGowarc(t, w.Files()[0], pages)
}

// TestWARCRejectedPage: a page whose records gowarc rejects stops the export with an error
// naming it and, the export failed, leaves no file. A writer closed after the rejected Write
// holds no half pair: both records are built before either is written.
func TestWARCRejectedPage(t *testing.T) {
	pages := mirrorPages("http://a.example/ok", "http://[::1/broken", "http://a.example/never")
	dir := t.TempDir()
	w, err := NewWARC(filepath.Join(dir, "r"), &WARCOptions{Date: baseTime, Rand: seededReader(1)})
	if err != nil {
		t.Fatal(err)
	}
	st, err := Run(context.Background(), sliceSource(pages), w, nil)
	if err == nil || !strings.Contains(err.Error(), "http://[::1/broken") || st.Pages != 1 {
		t.Fatalf("Run = %+v, %v; want an error naming the broken URL after 1 page", st, err)
	}
	if names := entries(t, dir); len(names) != 0 || len(w.Files()) != 0 {
		t.Fatalf("after the failed export: %q on disk, files %q; want none", names, w.Files())
	}

	w, err = NewWARC(filepath.Join(t.TempDir(), "r"), &WARCOptions{Date: baseTime, Rand: seededReader(1)})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(pages[0]); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(pages[1]); err == nil {
		t.Fatal("Write of the broken URL: no error")
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	checkWithGowarc(t, w.Files()[0], pages[:1])
}
