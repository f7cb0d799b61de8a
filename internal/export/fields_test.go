package export

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/crawl-project/crawl/storage"
)

func TestParseFields(t *testing.T) {
	for _, tc := range []struct {
		spec string
		want Field // match ignored
	}{
		{"h1=h1", Field{Name: "h1", Selector: "h1"}},
		{" title = head > title ", Field{Name: "title", Selector: "head > title"}},
		{"links[]=a@href", Field{Name: "links", Selector: "a", Attr: "href", All: true}},
		{"img=img.hero@data-SRC", Field{Name: "img", Selector: "img.hero", Attr: "data-src"}},
		{`mail=a[href^="mailto:x@y"]`, Field{Name: "mail", Selector: `a[href^="mailto:x@y"]`}},
		{`mail=a[href^="mailto:x@y"]@href`, Field{Name: "mail", Selector: `a[href^="mailto:x@y"]`, Attr: "href"}},
		{"eq=meta[name=description]@content", Field{Name: "eq", Selector: "meta[name=description]", Attr: "content"}},
	} {
		fs, err := ParseFields([]string{tc.spec})
		if err != nil {
			t.Errorf("%q: %v", tc.spec, err)
			continue
		}
		f := fs[0]
		f.match = nil
		if f != tc.want {
			t.Errorf("%q: %+v, want %+v", tc.spec, f, tc.want)
		}
	}
	for _, tc := range []struct {
		specs []string
		want  string
	}{
		{[]string{"h1"}, `"h1": want NAME=SELECTOR`},
		{[]string{"=h1"}, `"=h1": want NAME=SELECTOR`},
		{[]string{"x="}, `"x=": want NAME=SELECTOR`},
		{[]string{"[]=h1"}, `bad name ""`},
		{[]string{"a[b=h1"}, `bad name "a[b"`},
		{[]string{"x=h1[", "y=p"}, `"x=h1[": selector "h1["`},
		{[]string{"x=@href"}, `"x=@href": no selector before @href`},
		{[]string{"x=p::", "y=p"}, `"x=p::": selector`},
		{[]string{"x=h1", "x[]=h2"}, `the name "x" is given twice`},
	} {
		_, err := ParseFields(tc.specs)
		if !errors.Is(err, ErrBadField) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want ErrBadField containing %q", tc.specs, err, tc.want)
		}
	}
}

const fieldsPage = `<!doctype html><html><head><title>T</title>
<meta name=description content=" A  page ">
</head><body>
<h1>  Hello
  <code>world</code>&amp;  co </h1>
<h2>Second</h2>
<a href="/a">first</a> <a name=x>no href</a> <a href="/b?x=1&amp;y=2">second, "quoted"</a>
<svg><title>svg title</title></svg>
<p class=note>one</p><p class=note>two
 lines</p>
</body></html>`

func TestFieldValues(t *testing.T) {
	fs, err := ParseFields([]string{"h1=h1", "desc=meta[name=description]@content", "first=a@href",
		"links[]=a@href", "notes[]=p.note", "none=h3", "nones[]=h3", "anchors[]=a", "svgtitle=svg title"})
	if err != nil {
		t.Fatal(err)
	}
	d := newHTMLDecoder([]byte(fieldsPage), "text/html")
	got := extractFields(fs, d.root())
	var b bytes.Buffer
	if err := writeJSON(&b, got); err != nil {
		t.Fatal(err)
	}
	want := `{"h1":"Hello world& co","desc":" A  page ","first":"/a","links":["/a","/b?x=1&y=2"],` +
		`"notes":["one","two lines"],"none":null,"nones":[],"anchors":["first","no href","second, \"quoted\""],"svgtitle":"svg title"}`
	if b.String() != want {
		t.Errorf("fields:\n got %s\nwant %s", b.String(), want)
	}
	cells, err := got.cells()
	if err != nil {
		t.Fatal(err)
	}
	wantCells := []string{"Hello world& co", " A  page ", "/a", `["/a","/b?x=1&y=2"]`, `["one","two lines"]`, "", "[]",
		`["first","no href","second, \"quoted\""]`, "svg title"}
	if !reflect.DeepEqual(cells, wantCells) {
		t.Errorf("cells:\n got %q\nwant %q", cells, wantCells)
	}
}

// fieldPages are an HTML page, a page in windows-1252, a stylesheet and an HTML 404.
func fieldPages() []*storage.Page {
	css := &storage.Page{Seq: 3, URL: "http://a.example/s.css", FinalURL: "http://a.example/s.css", Status: 200,
		Header: http.Header{"Content-Type": {"text/css"}}, ContentType: "text/css", Body: []byte("h1{}")}
	latin := htmlPage(2, "http://a.example/caf", "", 200, "<h1>caf\xe9,\n\"ol\xe9\"</h1><a href=/x>x</a>")
	latin.Header = http.Header{"Content-Type": {"text/html; charset=windows-1252"}}
	return []*storage.Page{
		htmlPage(1, "http://a.example/", "", 200, fieldsPage),
		latin,
		css,
		htmlPage(4, "http://a.example/gone", "", 404, "<title>Not found</title><h1>404</h1>"),
	}
}

func TestJSONLFields(t *testing.T) {
	fs, err := ParseFields([]string{"h1=h1", "links[]=a@href"})
	if err != nil {
		t.Fatal(err)
	}
	lines := jsonlLines(t, fieldPages(), &JSONLOptions{Fields: fs}, nil)
	for u, want := range map[string]any{
		"http://a.example/":      map[string]any{"h1": "Hello world& co", "links": []any{"/a", "/b?x=1&y=2"}},
		"http://a.example/caf":   map[string]any{"h1": "café, \"olé\"", "links": []any{"/x"}},
		"http://a.example/gone":  map[string]any{"h1": "404", "links": []any{}},
		"http://a.example/s.css": nil,
	} {
		got, ok := lines[u]["fields"]
		if want == nil && ok || want != nil && !reflect.DeepEqual(got, want) {
			t.Errorf("%s: fields %#v, want %#v", u, got, want)
		}
	}
	// "fields" comes last, after every other field.
	var buf bytes.Buffer
	if _, err := Run(context.Background(), sliceSource(fieldPages()[:1]), NewJSONL(&buf, &JSONLOptions{Fields: fs, Text: true}), nil); err != nil {
		t.Fatal(err)
	}
	if keys := jsonKeys(t, buf.Bytes()); keys[len(keys)-1] != "fields" {
		t.Errorf("keys %q: want fields last", keys)
	}
}

// TestJSONLParsesOnce checks that title, text and fields share one parse of each page.
func TestJSONLParsesOnce(t *testing.T) {
	fs, err := ParseFields([]string{"h1=h1", "all[]=p", "href=a@href"})
	if err != nil {
		t.Fatal(err)
	}
	pages := fieldPages()
	html := 0
	for _, p := range pages {
		if isHTMLType(p.ContentType) {
			html++
		}
	}
	for _, opts := range []*JSONLOptions{{Fields: fs}, {Fields: fs, Text: true}, {Text: true}, {Fields: fs, NoBody: true}} {
		before := htmlParses.Load()
		jsonlLines(t, pages, opts, nil)
		if n := htmlParses.Load() - before; n != int64(html) {
			t.Errorf("%+v: %d parses of %d HTML pages, want one each", opts, n, html)
		}
	}
	before := htmlParses.Load()
	var buf bytes.Buffer
	w, err := NewCSV(&buf, fs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), sliceSource(pages), w, nil); err != nil {
		t.Fatal(err)
	}
	if n := htmlParses.Load() - before; n != int64(html) {
		t.Errorf("csv: %d parses of %d HTML pages, want one each", n, html)
	}
}

func TestCSV(t *testing.T) {
	fs, err := ParseFields([]string{"h1=h1", "links[]=a@href", "desc=meta[name=description]@content"})
	if err != nil {
		t.Fatal(err)
	}
	pages := fieldPages()
	full := map[uint64]*storage.Page{}
	for _, p := range pages { // the bodies come through Full, as from storage.DB.PagesMeta
		c := *p
		full[p.Seq], p.Body = &c, nil
	}
	var buf bytes.Buffer
	w, err := NewCSV(&buf, fs, &CSVOptions{Full: func(p *storage.Page) (*storage.Page, error) { return full[p.Seq], nil }})
	if err != nil {
		t.Fatal(err)
	}
	st, err := Run(context.Background(), sliceSource(pages), w, nil)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(bytes.NewReader(buf.Bytes())).ReadAll()
	if err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	want := [][]string{
		{"url", "h1", "links", "desc"},
		{"http://a.example/", "Hello world& co", `["/a","/b?x=1&y=2"]`, " A  page "},
		{"http://a.example/caf", "café, \"olé\"", `["/x"]`, ""},
		{"http://a.example/gone", "404", "[]", ""},
	}
	if !reflect.DeepEqual(rows, want) {
		t.Errorf("rows:\n got %q\nwant %q", rows, want)
	}
	if st.Pages != 3 || st.Omitted != 1 || st.Bytes != int64(buf.Len()) {
		t.Errorf("stats %+v, want 3 pages, 1 omitted (the stylesheet), %d bytes", st, buf.Len())
	}
	// An empty export still has its header; a field named url is refused.
	buf.Reset()
	w, err = NewCSV(&buf, fs[:1], nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil || buf.String() != "url,h1\n" {
		t.Errorf("empty export: %q, %v", buf.String(), err)
	}
	urlField, err := ParseFields([]string{"url=a@href"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewCSV(&buf, urlField, nil); !errors.Is(err, ErrBadField) || !strings.Contains(err.Error(), "url=a") {
		t.Errorf("a field named url: %v, want ErrBadField naming it", err)
	}
}
