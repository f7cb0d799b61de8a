package export

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/crawl-project/crawl/storage"
)

// deepPage is an HTML page whose body nests depth <div>s, with a title, a shallow span, a
// script and a paragraph at the bottom.
func deepPage(depth int) string {
	var b strings.Builder
	b.WriteString(`<!doctype html><title>Deep</title><span class=s>shallow</span>`)
	b.WriteString(strings.Repeat("<div>", depth))
	b.WriteString(`<script>var x = "<b>not text</b>";</script><p class=p>deep text</p><img src=/i.png>`)
	b.WriteString(strings.Repeat("</div>", depth))
	b.WriteString(`<a class=end href=/end>after</a>`)
	return b.String()
}

// TestJSONLDeepHTML: a page nested deeper than the HTML parser takes (512 elements) still
// gives its title, text and fields, read with its elements past depth 256 flattened, and its
// line says so ("nesting_flattened_at"); the export's Stats count and name it. A page within
// the limit is read as it is, and its line has no such field. 100,000 levels cost about one
// parse more.
func TestJSONLDeepHTML(t *testing.T) {
	const shallowURL, deepURL, deeperURL = "http://a.example/ok", "http://a.example/deep", "http://a.example/deeper"
	pages := []*storage.Page{
		htmlPage(1, shallowURL, "", 200, deepPage(400)),
		htmlPage(2, deepURL, "", 200, deepPage(600)),
		htmlPage(3, deeperURL, "", 200, deepPage(100_000)),
	}
	fields, err := ParseFields([]string{"s=span.s", "end=a.end@href", "imgs[]=img@src", "p=p.p"})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	start := time.Now()
	st, err := Run(t.Context(), sliceSource(pages), NewJSONL(&buf, &JSONLOptions{NoBody: true, Text: true, Fields: fields}), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("3 pages (400, 600 and 100,000 levels) exported in %v", time.Since(start))
	if st.Flattened != 2 || strings.Join(st.FlattenedURLs, " ") != deepURL+" "+deeperURL {
		t.Errorf("stats: %d flattened, %q; want the 2 deep pages", st.Flattened, st.FlattenedURLs)
	}
	lines := jsonlLines(t, pages, &JSONLOptions{NoBody: true, Text: true, Fields: fields}, nil) // lines under the scanner's 64 KiB
	for _, u := range []string{shallowURL, deepURL, deeperURL} {
		m := lines[u]
		f, _ := m["fields"].(map[string]any)
		text, _ := m["text"].(string)
		if m["title"] != "Deep" || text != "shallow deep text after" || f["s"] != "shallow" || f["end"] != "/end" {
			t.Errorf("%s: title %#v, text %q, fields %v; want Deep, %q and the fields", u, m["title"], text, f, "shallow deep text after")
		}
		if imgs, _ := f["imgs"].([]any); len(imgs) != 1 || imgs[0] != "/i.png" {
			t.Errorf("%s: imgs %#v, want the one image (a void element is kept)", u, f["imgs"])
		}
		at, flagged := m["nesting_flattened_at"]
		switch {
		case u == shallowURL && (flagged || f["p"] != "deep text"):
			t.Errorf("%s (400 levels): nesting_flattened_at %v, p %#v; want it read as it is", u, at, f["p"])
		case u != shallowURL && at != float64(256):
			t.Errorf("%s: nesting_flattened_at %#v, want 256", u, at)
		}
	}
}

// TestFlattenDeep: flattenDeep keeps text, comments, void elements and end tags that close
// nothing; leaves out the tags past the limit with their end tags, and a left-out raw-text
// element's content; and an end tag closes the nearest open element of its name with those
// inside it. Unmatched end tags on a deep stack cost linear time.
func TestFlattenDeep(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`<a><b><c>x</c>y</b>z</a>`, `<a><b>xy</b>z</a>`},
		{`<a><b><c><br>x<!--k--></c></b></a>`, `<a><b><br>x<!--k--></b></a>`},
		{`<a><b><script>"<i>"</script>t</b></a>`, `<a><b>t</b></a>`},
		{`<a><b></q><c>x</a>y`, `<a><b></q>x</a>y`},
		{`<a><x><x><x>1</x>2</x>3</x>4</a>`, `<a><x>123</x>4</a>`},
	} {
		if got := string(flattenDeep([]byte(tc.in), 2)); got != tc.want {
			t.Errorf("flattenDeep(%q, 2) = %q, want %q", tc.in, got, tc.want)
		}
	}
	hostile := []byte(strings.Repeat("<div>", 200_000) + strings.Repeat("</span>", 200_000) + "<span></span>" + strings.Repeat("</div>", 200_000))
	start := time.Now()
	out := flattenDeep(hostile, 256)
	if n := bytes.Count(out, []byte("<div>")); n != 256 {
		t.Errorf("%d <div> kept, want 256", n)
	}
	t.Logf("%d KiB flattened in %v", len(hostile)>>10, time.Since(start))
}

// FuzzFlattenDeep: flattenDeep never panics and only leaves bytes out.
func FuzzFlattenDeep(f *testing.F) {
	f.Add([]byte(deepPage(40)), 8)
	f.Add([]byte(`<a><b></q><c><script>"<i>"</script>x</a>y`), 1)
	f.Fuzz(func(t *testing.T, b []byte, limit int) {
		if out := flattenDeep(b, limit%600); len(out) > len(b) {
			t.Fatalf("%d bytes out of %d in", len(out), len(b))
		}
	})
}
