package export

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crawl-project/crawl/storage"
)

func TestJSONLRoundTrip(t *testing.T) {
	for _, noBody := range []bool{false, true} {
		t.Run(map[bool]string{false: "body", true: "no-body"}[noBody], func(t *testing.T) {
			pages := syntheticPages()
			var buf bytes.Buffer
			w := NewJSONL(&buf, &JSONLOptions{NoBody: noBody})
			st, err := Run(context.Background(), sliceSource(pages), w, nil)
			if err != nil {
				t.Fatal(err)
			}
			if st.Pages != int64(len(pages)) || st.Bytes != int64(buf.Len()) || st.Files != 1 {
				t.Errorf("stats %+v, buffer %d bytes", st, buf.Len())
			}
			sc := bufio.NewScanner(&buf)
			sc.Buffer(nil, 1<<20)
			i := 0
			for ; sc.Scan(); i++ {
				if i >= len(pages) {
					t.Fatalf("more lines than pages")
				}
				checkJSONLine(t, sc.Bytes(), pages[i], noBody)
			}
			if err := sc.Err(); err != nil {
				t.Fatal(err)
			}
			if i != len(pages) {
				t.Fatalf("%d lines, want %d", i, len(pages))
			}
		})
	}
}

// fixtureTitles are the titles of syntheticPages: only its first page is HTML with a <title>
// (the truncated HTML page has none; the others are not HTML).
var fixtureTitles = map[string]string{"http://a.example/": "héllo"}

// fixtureExtras are the charset and outlinks of syntheticPages (absent: nil).
var fixtureExtras = map[string]map[string]any{
	"http://a.example/":                                 {"charset": "utf-8", "outlinks": 1.0},
	"http://a.example/missing":                          {"charset": ""}, // text/plain without a charset parameter
	"http://a.example/big":                              {"charset": "utf-8", "outlinks": 0.0},
	"http://xn--bcher-kva.example/stra%C3%9Fe?q=%C3%BC": {"charset": "utf-8"},
	"http://bücher.example/größe":                       {"charset": "iso-8859-1"},
}

// schemaOrder is the order of the fields in SCHEMA.md.
var schemaOrder = []string{"url", "final_url", "status", "headers", "fetched_at", "duration_ms",
	"depth", "parent", "content_type", "truncated", "decoded_from", "body", "body_base64",
	"title", "charset", "outlinks", "referrer", "text", "fields", "nesting_flattened_at", "not_modified",
	"rendered", "render_cut", "subresource"}

// jsonKeys returns the top-level keys of the JSON object line, in order.
func jsonKeys(t *testing.T, line []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(line))
	if _, err := dec.Token(); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k.(string))
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

// isSubsequence reports whether every element of a is in b, in b's order.
func isSubsequence(a, b []string) bool {
	for _, x := range a {
		i := slices.Index(b, x)
		if i < 0 {
			return false
		}
		b = b[i+1:]
	}
	return true
}

func checkJSONLine(t *testing.T, line []byte, p *storage.Page, noBody bool) {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(line, &m); err != nil {
		t.Fatalf("line does not parse: %v\n%s", err, line)
	}
	want := map[string]any{
		"url": p.URL, "final_url": p.FinalURL, "status": float64(p.Status),
		"depth": float64(p.Depth), "parent": p.Parent, "content_type": p.ContentType,
		"truncated": p.Truncated, "decoded_from": p.DecodedFrom,
		"duration_ms": float64(p.Duration.Microseconds()) / 1000,
	}
	for k, v := range want {
		if !reflect.DeepEqual(m[k], v) {
			t.Errorf("%s: %s = %#v, want %#v", p.URL, k, m[k], v)
		}
	}
	ts, _ := m["fetched_at"].(string)
	at, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil || !at.Equal(p.FetchedAt.Truncate(time.Microsecond)) || ts[len(ts)-1] != 'Z' || len(ts) != len("2006-01-02T15:04:05.000000Z") {
		t.Errorf("%s: fetched_at %q (%v), want %v in UTC with microseconds", p.URL, ts, err, p.FetchedAt)
	}
	hdr, ok := m["headers"].(map[string]any)
	if !ok {
		t.Fatalf("%s: headers = %#v, want an object", p.URL, m["headers"])
	}
	if len(hdr) != len(p.Header) {
		t.Errorf("%s: %d headers, want %d", p.URL, len(hdr), len(p.Header))
	}
	for k, vs := range p.Header {
		arr, _ := hdr[k].([]any)
		if len(arr) != len(vs) {
			t.Errorf("%s: header %s = %#v, want %q", p.URL, k, hdr[k], vs)
			continue
		}
		for j := range vs {
			if arr[j] != vs[j] {
				t.Errorf("%s: header %s[%d] = %#v, want %q", p.URL, k, j, arr[j], vs[j])
			}
		}
	}

	title, hasTitle := m["title"].(string)
	if _, ok := m["title"]; ok != hasTitle {
		t.Errorf("%s: title = %#v, want a string or absent", p.URL, m["title"])
	}
	if want, ok := fixtureTitles[p.URL]; ok { // the fixture has bodies even with NoBody
		if !hasTitle || title != want {
			t.Errorf("%s: title = %#v, want %q", p.URL, m["title"], want)
		}
	} else if hasTitle {
		t.Errorf("%s: title %q, want none (content type %q)", p.URL, title, p.ContentType)
	}
	if keys := jsonKeys(t, line); !isSubsequence(keys, schemaOrder) {
		t.Errorf("%s: fields %q are not in schema order %q", p.URL, keys, schemaOrder)
	}
	if m["referrer"] != p.Parent { // no redirect in the fixture leads anywhere stored
		t.Errorf("%s: referrer = %#v, want %q", p.URL, m["referrer"], p.Parent)
	}
	extra := fixtureExtras[p.URL]
	for _, k := range []string{"charset", "outlinks"} {
		if !reflect.DeepEqual(m[k], extra[k]) {
			t.Errorf("%s: %s = %#v, want %#v", p.URL, k, m[k], extra[k])
		}
	}
	if _, ok := m["text"]; ok {
		t.Errorf("%s: text without the Text option", p.URL)
	}

	body, hasBody := m["body"].(string)
	b64, _ := m["body_base64"].(bool)
	if noBody {
		if _, ok := m["body"]; ok || b64 {
			t.Errorf("%s: body present with NoBody", p.URL)
		}
		return
	}
	if !hasBody {
		t.Fatalf("%s: no body string", p.URL)
	}
	var got []byte
	if b64 {
		if got, err = base64.StdEncoding.DecodeString(body); err != nil {
			t.Fatalf("%s: body_base64 but not base64: %v", p.URL, err)
		}
	} else {
		got = []byte(body)
	}
	if !bytes.Equal(got, p.Body) {
		t.Errorf("%s: body differs from the stored body", p.URL)
	}
	wantText := IsTextual(p.ContentType) && !bytes.Equal(p.Body, []byte("gr\xf6\xdfe"))
	if b64 == wantText {
		t.Errorf("%s (%s): body_base64 = %v", p.URL, p.ContentType, b64)
	}
}

func TestIsTextual(t *testing.T) {
	for ct, want := range map[string]bool{
		"text/html": true, "text/plain": true, "text/css": true, "application/json": true,
		"application/ld+json": true, "application/xml": true, "application/atom+xml": true,
		"application/javascript": true, "text/javascript": true, "application/xhtml+xml": true,
		"image/svg+xml": true, "Text/HTML; charset=utf-8": true,
		"image/png": false, "application/octet-stream": false, "application/pdf": false,
		"": false, "json": false, "video/json": false, "application/zip": false,
	} {
		if got := IsTextual(ct); got != want {
			t.Errorf("IsTextual(%q) = %v, want %v", ct, got, want)
		}
	}
}

func TestFilter(t *testing.T) {
	p := func(u string, status int, at time.Time) *storage.Page {
		return &storage.Page{URL: u, FinalURL: u, Status: status, FetchedAt: at}
	}
	t0 := baseTime
	for _, tc := range []struct {
		name   string
		hosts  []string
		status string
		since  time.Time
		page   *storage.Page
		want   bool
	}{
		{"no filter", nil, "", time.Time{}, p("http://a.example/", 500, t0), true},
		{"host match", []string{"a.example"}, "", time.Time{}, p("http://a.example/x", 200, t0), true},
		{"host case and list", []string{"b.example, A.EXAMPLE"}, "", time.Time{}, p("http://a.example/x", 200, t0), true},
		{"repeated host flag", []string{"b.example", "a.example"}, "", time.Time{}, p("http://a.example/x", 200, t0), true},
		{"host other", []string{"b.example"}, "", time.Time{}, p("http://a.example/x", 200, t0), false},
		{"default port dropped", []string{"a.example:443"}, "", time.Time{}, p("https://a.example/", 200, t0), true},
		{"a name matches every port", []string{"a.example"}, "", time.Time{}, p("http://a.example:8080/", 200, t0), true},
		{"a port matches that port only", []string{"a.example:8080"}, "", time.Time{}, p("http://a.example:9090/", 200, t0), false},
		{"a port matches that port only, default port", []string{"a.example:443"}, "", time.Time{}, p("https://a.example:8443/", 200, t0), false},
		{"an ipv6 name matches every port", []string{"[::1]"}, "", time.Time{}, p("http://[::1]:8080/", 200, t0), true},
		{"port host", []string{"a.example:8080"}, "", time.Time{}, p("http://a.example:8080/", 200, t0), true},
		{"idn host", []string{"bücher.example"}, "", time.Time{}, p("http://xn--bcher-kva.example/", 200, t0), true},
		{"ipv6", []string{"[::1]:8080"}, "", time.Time{}, p("http://[::1]:8080/", 200, t0), true},
		{"host from final url", []string{"b.example"}, "", time.Time{}, &storage.Page{URL: "http://a.example/", FinalURL: "http://b.example/", Status: 200}, true},
		{"status code", nil, "200,301", time.Time{}, p("http://a.example/", 301, t0), true},
		{"status code miss", nil, "200,301", time.Time{}, p("http://a.example/", 302, t0), false},
		{"status class", nil, "2xx", time.Time{}, p("http://a.example/", 204, t0), true},
		{"status class miss", nil, "2XX", time.Time{}, p("http://a.example/", 404, t0), false},
		{"status range", nil, "400-499", time.Time{}, p("http://a.example/", 404, t0), true},
		{"since equal", nil, "", t0, p("http://a.example/", 200, t0), true},
		{"since before", nil, "", t0, p("http://a.example/", 200, t0.Add(-time.Nanosecond)), false},
		{"all three", []string{"a.example"}, "2xx", t0, p("http://a.example/", 200, t0.Add(time.Hour)), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := NewFilter(tc.hosts, tc.status, tc.since)
			if err != nil {
				t.Fatal(err)
			}
			if got := f.Match(tc.page); got != tc.want {
				t.Errorf("Match = %v, want %v", got, tc.want)
			}
		})
	}
	for _, bad := range []string{"abc", "2x", "6xx", "99", "1000", "500-400", "2xx-3xx"} {
		if _, err := NewFilter(nil, bad, time.Time{}); !errors.Is(err, ErrBadFilter) {
			t.Errorf("NewFilter(status %q): err = %v, want ErrBadFilter", bad, err)
		}
	}
}

type failWriter struct {
	n     int
	fail  int
	close bool
}

func (w *failWriter) Write(*storage.Page) error {
	w.n++
	if w.n == w.fail {
		return errors.New("disk full")
	}
	return nil
}
func (w *failWriter) Close() error { w.close = true; return nil }
func (w *failWriter) Stats() Stats { return Stats{Pages: int64(w.n)} }

func TestRun(t *testing.T) {
	pages := syntheticPages()
	f, _ := NewFilter(nil, "2xx", time.Time{})
	w := &failWriter{}
	st, err := Run(context.Background(), sliceSource(pages), w, f)
	if err != nil || st.Pages != 6 || st.Skipped != 2 || !w.close {
		t.Errorf("filtered run: %+v, %v, closed %v; want 6 written, 2 skipped", st, err, w.close)
	}

	w = &failWriter{fail: 2}
	if _, err := Run(context.Background(), sliceSource(pages), w, nil); err == nil || w.n != 2 || !w.close {
		t.Errorf("write error: err %v after %d writes, closed %v", err, w.n, w.close)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	w = &failWriter{}
	if _, err := Run(ctx, sliceSource(pages), w, nil); !errors.Is(err, context.Canceled) || w.n != 0 || !w.close {
		t.Errorf("cancelled: err %v, %d writes", err, w.n)
	}
}

func TestHTMLTitle(t *testing.T) {
	long := strings.Repeat("<p>filler text</p>\n", 20000) // 360 KB after the title
	for _, tc := range []struct {
		name, body, ctype string
		want              string
		ok                bool
	}{
		{"plain", "<!doctype html><title>Hello</title>", "text/html", "Hello", true},
		{"whitespace collapsed", "<title>\n\t Hello \r\n  world\f </title>", "", "Hello world", true},
		{"nbsp kept", "<title>a&nbsp;b\u00a0</title>", "", "a\u00a0b\u00a0", true},
		{"entities", "<title>Fish &amp; chips &lt;3 &#x263A;</title>", "", "Fish & chips <3 ☺", true},
		{"rcdata: tags are text", "<title><b>bold</b></title>", "", "<b>bold</b>", true},
		{"upper case, attributes", "<HTML><HEAD><TITLE lang=en>Shout</TITLE ></HEAD>", "", "Shout", true},
		{"title in body", "<body><p>x</p><title>late</title>", "", "late", true},
		{"first of two", "<title>one</title><title>two</title>", "", "one", true},
		{"empty title", "<head><title> </title></head>", "", "", true},
		{"no title", "<html><head></head><body>titles are <b>elsewhere</b></body>", "", "", false},
		{"svg title is not the title", "<body><svg><title>icon</title></svg><title>real</title>", "", "real", true},
		{"svg title only", "<body><svg><title>icon</title></svg>", "", "", false},
		{"in template", "<template><title>no</title></template><title>yes</title>", "", "yes", true},
		{"commented out first", "<!-- <title>old</title> --><title>new</title>", "", "new", true},
		{"end tag in a script first", "<script>var s='</title>';</script><title>real</title>", "", "real", true},
		{"not an end tag", "<title>a</titlex>b</title>", "", "a</titlex>b", true},
		{"unterminated", "<title>runs to the end", "", "runs to the end", true},
		{"huge page after the title", "<title>big</title>" + long, "", "big", true},
		{"huge page before the title", long + "<title>deep</title>", "", "deep", true},
		{"utf-8 undeclared", "<title>Stra\u00dfe \u2713</title>", "text/html", "Straße ✓", true},
		{"latin-1 from header", "<title>gr\xf6\xdfe</title>", "text/html; charset=ISO-8859-1", "größe", true},
		{"windows-1252 from meta", "<meta charset=windows-1252><title>caf\xe9 \x80</title>", "text/html", "café €", true},
		{"undeclared legacy bytes", "<title>caf\xe9</title>", "text/html", "café", true},
		{"header wins over meta", "<meta charset=utf-8><title>\xe9</title>", "text/html; charset=latin1", "é", true},
		{"shift_jis from header", "<title>\x93\xfa\x96\x7b</title>", "text/html; charset=Shift_JIS", "日本", true},
		{"utf-16 with BOM", utf16le("\ufeff<title>wide</title>"), "text/html", "wide", true},
		{"invalid utf-8 declared", "<title>a\xffb</title>", "text/html; charset=utf-8", "a\ufffdb", true},
		{"empty body", "", "text/html", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := htmlTitle([]byte(tc.body), tc.ctype)
			if got != tc.want || ok != tc.ok {
				t.Errorf("htmlTitle = %q, %v; want %q, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

// utf16le encodes s as UTF-16 little-endian (ASCII and BMP only, enough for the test).
func utf16le(s string) string {
	var b []byte
	for _, r := range s {
		b = append(b, byte(r), byte(r>>8))
	}
	return string(b)
}

func TestEndOfFirstTitle(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
	}{
		{"<title>a</title>rest", len("<title>a</title>")},
		{"<title>a</TITLE \n x>rest", len("<title>a</TITLE \n x>")},
		{"<title>a</title/>", len("<title>a</title/>")},
		{"<title>a</titles></title>", len("<title>a</titles></title>")},
		{"<title>a</title", -1},
		{"<title>a</title ", -1},
		{"no title", -1},
	} {
		if got := endOfFirstTitle([]byte(tc.in)); got != tc.want {
			t.Errorf("endOfFirstTitle(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func TestJSONLTitleOnlyForHTML(t *testing.T) {
	body := []byte("<title>T</title>")
	for _, tc := range []struct {
		ctype string
		want  bool
	}{
		{"text/html", true}, {"application/xhtml+xml", true}, {"text/plain", false},
		{"application/xml", false}, {"", false},
	} {
		var buf bytes.Buffer
		w := NewJSONL(&buf, nil)
		p := &storage.Page{URL: "http://a.example/", FinalURL: "http://a.example/", Status: 200, ContentType: tc.ctype, Body: body}
		if err := w.Write(p); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if got := bytes.Contains(buf.Bytes(), []byte(`"title":"T"`)); got != tc.want {
			t.Errorf("content type %q: title written = %v, want %v: %s", tc.ctype, got, tc.want, buf.Bytes())
		}
	}
}

// TestHTMLTitleParsesOnlyThePrefix: a large page whose title comes first must not be parsed
// into a DOM as a whole.
func TestHTMLTitleParsesOnlyThePrefix(t *testing.T) {
	body := []byte("<!doctype html><head><title>first</title></head><body>" + strings.Repeat("<p><a href=/x>link</a></p>\n", 100_000)) // 2.8 MB
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	got, ok := htmlTitle(body, "text/html")
	runtime.ReadMemStats(&after)
	if got != "first" || !ok {
		t.Fatalf("htmlTitle = %q, %v", got, ok)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
		t.Errorf("htmlTitle allocated %d bytes for a %d-byte page with its title first; want < 1 MiB", alloc, len(body))
	}
}
