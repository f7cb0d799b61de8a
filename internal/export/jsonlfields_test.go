package export

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/crawl-project/crawl/storage"
)

// jsonlLines exports pages with opts through f and returns the lines decoded, by URL.
func jsonlLines(t *testing.T, pages []*storage.Page, opts *JSONLOptions, f *Filter) map[string]map[string]any {
	t.Helper()
	var buf bytes.Buffer
	if _, err := Run(context.Background(), sliceSource(pages), NewJSONL(&buf, opts), f); err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]any{}
	sc := bufio.NewScanner(&buf)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		out[m["url"].(string)] = m
	}
	return out
}

func htmlPage(seq uint64, u, parent string, status int, body string) *storage.Page {
	return &storage.Page{Seq: seq, URL: u, FinalURL: u, Status: status, Parent: parent,
		Header: http.Header{"Content-Type": {"text/html"}}, ContentType: "text/html", Body: []byte(body)}
}

func TestJSONLReferrerFollowsRedirects(t *testing.T) {
	const a, r1, r2, t1, t2 = "http://a.example/", "http://a.example/r1", "http://a.example/r2", "http://b.example/t1", "http://b.example/t2"
	pages := []*storage.Page{
		htmlPage(1, a, "", 200, `<a href=/r1>x</a>`),
		htmlPage(2, r1, a, 301, ""),  // a links to r1, which redirects to r2
		htmlPage(3, r2, r1, 302, ""), // which redirects to t1
		htmlPage(4, t1, r2, 200, `<a href=/t2>y</a>`),
		htmlPage(5, t2, t1, 200, ""),
		htmlPage(6, r1, a, 200, `<a href=/t2>y</a>`), // r1 no longer redirects (a recrawl)
		htmlPage(7, t2, r1, 200, ""),
	}
	want := map[int]string{1: "", 2: a, 3: a, 4: a, 5: t1, 6: a, 7: r1}
	check := func(t *testing.T, lines []map[string]any, seqs []int) {
		t.Helper()
		for i, m := range lines {
			if m["referrer"] != want[seqs[i]] {
				t.Errorf("page %d (%s): referrer %#v, want %q", seqs[i], m["url"], m["referrer"], want[seqs[i]])
			}
			if m["parent"] != pages[seqs[i]-1].Parent {
				t.Errorf("page %d: parent %#v, want %q", seqs[i], m["parent"], pages[seqs[i]-1].Parent)
			}
		}
	}
	run := func(f *Filter) []map[string]any {
		var buf bytes.Buffer
		if _, err := Run(context.Background(), sliceSource(pages), NewJSONL(&buf, nil), f); err != nil {
			t.Fatal(err)
		}
		var out []map[string]any
		sc := bufio.NewScanner(&buf)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Fatal(err)
			}
			out = append(out, m)
		}
		return out
	}
	check(t, run(nil), []int{1, 2, 3, 4, 5, 6, 7})
	// The redirects filtered out of the export still pass the referrer on.
	f, err := NewFilter(nil, "200", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	check(t, run(f), []int{1, 4, 5, 6, 7})
}

func TestJSONLOutlinks(t *testing.T) {
	body := `<a href=/x>1</a><a href="/x">dup</a><a href=/y rel=nofollow>2</a><area href=http://c.example/>` +
		`<link rel=stylesheet href=/s.css><a href="mailto:a@b">no</a>`
	lines := jsonlLines(t, []*storage.Page{
		htmlPage(1, "http://a.example/", "", 200, body),
		htmlPage(2, "http://a.example/404", "", 404, body),
	}, nil, nil)
	if got := lines["http://a.example/"]["outlinks"]; got != 3.0 {
		t.Errorf("outlinks = %#v, want 3 (/x, /y, c.example)", got)
	}
	if got, ok := lines["http://a.example/404"]["outlinks"]; ok {
		t.Errorf("404: outlinks = %#v, want none (links of error pages are not followed)", got)
	}
}

func TestHTMLCharset(t *testing.T) {
	for _, tc := range []struct{ name, ct, body, want string }{
		{"header", "text/html; charset=ISO-8859-1", "caf\xe9", "windows-1252"},
		{"meta", "text/html", `<meta charset="shift_jis">` + "\x82\xa0", "shift_jis"},
		{"meta but valid UTF-8", "text/html", `<meta charset="shift_jis">café`, "utf-8"},
		{"header wins over valid UTF-8", "text/html; charset=windows-1252", `café`, "windows-1252"},
		{"none, not UTF-8", "text/html", "caf\xe9", "windows-1252"},
		{"none", "text/html", "", "utf-8"},
		{"BOM", "text/html", utf16le("\ufeff<p>hi"), "utf-16le"},
	} {
		if got := newHTMLDecoder([]byte(tc.body), tc.ct).charset(); got != tc.want {
			t.Errorf("%s: charset %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestHTMLText(t *testing.T) {
	for _, tc := range []struct{ name, ct, body, want string }{
		{"blocks and inline", "text/html", `<title>T</title><h1>Head</h1><p>he<b>llo</b>  <i>w</i>orld</p><div>x&amp;y</div>`, "Head hello world x&y"},
		{"hidden", "text/html", `<head><style>p{}</style><script>var a</script></head><body><script>x()</script>` +
			`<noscript>ns</noscript><template>tp</template><p hidden>h</p><!-- c --><p>seen</p>`, "seen"},
		{"br and lists", "text/html", `<ul><li>a<li>b</ul>c<br>d`, "a b c d"},
		{"charset", "text/html; charset=windows-1252", "<p>caf\xe9</p>", "café"},
		{"UTF-16", "text/html", utf16le("\ufeff<p>h\u00e9</p>"), "hé"},
		{"empty", "text/html", "", ""},
	} {
		if got := newHTMLDecoder([]byte(tc.body), tc.ct).text(); got != tc.want {
			t.Errorf("%s: text %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestJSONLText(t *testing.T) {
	pages := []*storage.Page{
		htmlPage(1, "http://a.example/", "", 200, `<title>T</title><p>Hello <b>there</b></p>`),
		{Seq: 2, URL: "http://a.example/t", Status: 200, ContentType: "text/plain", Body: []byte("plain")},
	}
	lines := jsonlLines(t, pages, &JSONLOptions{Text: true}, nil)
	if got := lines["http://a.example/"]["text"]; got != "Hello there" {
		t.Errorf("text = %#v, want %q", got, "Hello there")
	}
	if got, ok := lines["http://a.example/t"]["text"]; ok {
		t.Errorf("text/plain: text = %#v, want none (the body is the text)", got)
	}
	if _, ok := jsonlLines(t, pages, nil, nil)["http://a.example/"]["text"]; ok {
		t.Error("text written without the Text option")
	}
}

func TestJSONLNoBodyReadsHTMLBodies(t *testing.T) {
	full := []*storage.Page{
		htmlPage(1, "http://a.example/", "", 200, `<title>T</title><a href=/b>b</a><p>words`),
		{Seq: 2, URL: "http://a.example/img", Status: 200, ContentType: "image/png", Body: []byte("\x89PNG")},
		htmlPage(3, "http://a.example/empty", "", 200, ""),
	}
	meta := make([]*storage.Page, len(full))
	for i, p := range full {
		c := *p
		c.Body = nil
		meta[i] = &c
	}
	var asked []uint64
	load := func(p *storage.Page) (*storage.Page, error) {
		asked = append(asked, p.Seq)
		return full[p.Seq-1], nil
	}
	lines := jsonlLines(t, meta, &JSONLOptions{NoBody: true, Full: load, Text: true}, nil)
	a := lines["http://a.example/"]
	if a["title"] != "T" || a["outlinks"] != 1.0 || a["charset"] != "utf-8" || a["text"] != "b words" {
		t.Errorf("no-body line: title %#v outlinks %#v charset %#v text %#v, want T, 1, utf-8, \"b words\"", a["title"], a["outlinks"], a["charset"], a["text"])
	}
	if _, ok := a["body"]; ok {
		t.Error("body written with NoBody")
	}
	if e := lines["http://a.example/empty"]; e["outlinks"] != 0.0 || e["charset"] != "utf-8" {
		t.Errorf("empty page: outlinks %#v charset %#v, want 0 and utf-8", e["outlinks"], e["charset"])
	}
	if len(asked) != 2 || asked[0] != 1 || asked[1] != 3 {
		t.Errorf("bodies read for pages %v, want the HTML ones only: [1 3]", asked)
	}
	// Without a way to read bodies, the body-derived fields are left out rather than guessed.
	a = jsonlLines(t, meta, &JSONLOptions{NoBody: true}, nil)["http://a.example/"]
	for _, k := range []string{"title", "outlinks", "charset", "text"} {
		if v, ok := a[k]; ok {
			t.Errorf("no body and no Full func: %s = %#v, want absent", k, v)
		}
	}
}
