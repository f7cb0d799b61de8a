package fetch

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"

	"github.com/crawl-project/crawl/internal/urlnorm"
)

// diffLinks describes how two answers of ExtractLinks differ, or returns "".
func diffLinks(got, want Links) string {
	var b strings.Builder
	if len(got.Links) != len(want.Links) {
		fmt.Fprintf(&b, "%d links, want %d; ", len(got.Links), len(want.Links))
	}
	for i := range min(len(got.Links), len(want.Links)) {
		g, w := got.Links[i], want.Links[i]
		if g.URL.String() != w.URL.String() || g.NoFollow != w.NoFollow {
			fmt.Fprintf(&b, "link %d: %s nofollow=%v, want %s nofollow=%v; ", i, g.URL, g.NoFollow, w.URL, w.NoFollow)
		}
	}
	if len(got.Skipped) != len(want.Skipped) {
		fmt.Fprintf(&b, "%d skipped, want %d; ", len(got.Skipped), len(want.Skipped))
	}
	for i := range min(len(got.Skipped), len(want.Skipped)) {
		g, w := got.Skipped[i], want.Skipped[i]
		if g.Ref != w.Ref || g.Err.Error() != w.Err.Error() {
			fmt.Fprintf(&b, "skip %d: %q (%v), want %q (%v); ", i, g.Ref, g.Err, w.Ref, w.Err)
		}
	}
	if got.Dropped != want.Dropped || got.NoIndex != want.NoIndex || got.NoFollow != want.NoFollow {
		fmt.Fprintf(&b, "dropped %d noindex %v nofollow %v, want %d %v %v", got.Dropped, got.NoIndex, got.NoFollow,
			want.Dropped, want.NoIndex, want.NoFollow)
	}
	return b.String()
}

// checkAgainstTokenizer fails t if ExtractLinks and the Tokenizer-based oracle disagree on body.
func checkAgainstTokenizer(t *testing.T, body string) {
	t.Helper()
	base, _ := urlnorm.Parse("http://example.com/dir/page")
	h := http.Header{"X-Robots-Tag": {"otherbot: noindex"}}
	got := extractLinks(base, h, "text/html", []byte(body), "crawl", 5)
	want := refExtractLinks(base, h, "text/html", []byte(body), "crawl", 5)
	if d := diffLinks(got, want); d != "" {
		t.Fatalf("on %q:\n%s", body, d)
	}
}

// scanFragments are pieces of HTML, valid and not, that random documents are made of: every
// construct whose tokenizing rules the scanner follows, and the bytes that end or confuse them.
var scanFragments = []string{
	`<a href="x">`, `<A HREF=y>`, `<a href='z' rel="nofollow">`, `<a href=q rel=NoFollow>`, `<a rel=nofollow>`,
	`<area href=/ar>`, `<iframe src=//h/f>`, `<FRAME src=fr>`, `<link rel="canonical next" href="?p=2">`,
	`<link rel=prev href=/pv>`, `<link href=/nolink>`, `<meta name=robots content="noindex,nofollow">`,
	`<meta name=ROBOTS content=none>`, `<meta name=crawl content=nofollow>`, `<meta name=" robots " content=noindex>`,
	`<meta content=nofollow name=robots>`, `<base href="/b/">`, `<base href=//other.example/o/>`, `<base href="javascript:x">`,
	`<script>`, `<SCRIPT type=x>`, `</script>`, `</SCRIPT >`, `</script/>`, `</scriptx>`, `<script/>`,
	`<!--`, `-->`, `--!>`, `<!-->`, `<!--->`, `<!---->`, `-`, `--`, `!`, `<!`, `<!-`, `<!--x`,
	`<style>`, `</style>`, `<title>`, `</title/>`, `</TITLE>`, `<textarea>`, `</textarea >`, `<xmp>`, `</xmp>`,
	`<plaintext>`, `<noscript>`, `</noscript>`, `<noembed>`, `</noembed>`, `<noframes>`, `</noframes>`, `</iframe>`,
	`<!DOCTYPE html>`, `<!doctype`, `<!DOCTYP`, `<?xml ?>`, `<?`, `</>`, `</ a>`, `</`, `</a`, `</a href=">"x>`,
	`<`, `>`, `<a`, `<a `, `href`, `=`, `"`, `'`, ` `, "\t", "\n", "\f", `/`, `//`,
	`&amp;`, `&copy=1`, `&copy`, `&#x41;`, `&#65`, `&lt`, `&notit;`, `&amp`, "\x00", "\r\n", "\r",
	`<a/b href=c>`, `<a =x href=y>`, `<a href = " sp ">`, `<a href=1 href=2>`, `<a HREF=1 href=2>`, `<a href>`,
	`<a href=>`, `<a href= >`, `<a href=/x/>`, `<a href=x/ >`, `<a/href=s>`, `<a href="a&amp;b=1&amp;c">`,
	`<a href='?a=1&copy=2'>`, `<a href="x&#13;y">`, "<a href=\"p\rq\">", "<a href=\"n\x00ul\">", "<a\x00 href=n>",
	"<a h\x00ref=n>", `<a href="mailto:m@x">`, `<a href="#frag">`, `<a href="//h:99999/">`,
	`<svg>`, `<![CDATA[<a href=cd>]]>`, `<a href="unterminated`, `<a href='un`, `<a href=un`,
	`<script><!--<script></script>-->`, `<!--<script>`, `<a href=&quot;q&quot;>`, `<img src=i>`, `<p>text</p>`,
	"words ", "x", "<a href=\"\xff\xfe\">", `</script x="<a href=in-end>">`, `</title a='<a href=t>'>`,
	`</p title="<a href=e>">`, `</style x=<a>`, `</textarea x=">`, `<p class="<a href=attr>">`,
}

func randomDoc(r *rand.Rand, n int) string {
	var b strings.Builder
	for range n {
		b.WriteString(scanFragments[r.IntN(len(scanFragments))])
	}
	return b.String()
}

// TestScannerMatchesTokenizer holds ExtractLinks' tag scanner to golang.org/x/net/html's
// Tokenizer: random documents made of scanFragments, every prefix of some of them (input
// ending anywhere), and the fuzz seeds give the same links, skips and directives.
func TestScannerMatchesTokenizer(t *testing.T) {
	const seed = 21
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 0))
	docs := 20000
	if testing.Short() || raceEnabled {
		docs = 2000
	}
	for i := range docs {
		doc := randomDoc(r, 1+r.IntN(40))
		checkAgainstTokenizer(t, doc)
		if i%50 == 0 {
			for j := range len(doc) {
				checkAgainstTokenizer(t, doc[:j])
			}
		}
	}
	for _, f := range scanFragments {
		checkAgainstTokenizer(t, f)
	}
}

func FuzzScannerMatchesTokenizer(f *testing.F) {
	r := rand.New(rand.NewPCG(1, 1))
	for range 50 {
		f.Add(randomDoc(r, 10))
	}
	f.Fuzz(func(t *testing.T, body string) {
		checkAgainstTokenizer(t, body)
	})
}

func TestAttrValue(t *testing.T) {
	tests := []struct {
		v     string
		quote byte
		want  string
	}{
		{"plain", '"', "plain"},
		{"a&amp;b", '"', "a&b"},
		{"&amp;amp;", '"', "&amp;"},
		{"?a=1&copy=2", '\'', "?a=1&copy=2"}, // a legacy name before '=' stays as written in an attribute
		{"&copy;", '"', "\u00a9"},
		{"x&#13;y", '"', "x\ry"},
		{"p\r\nq\rr", '"', "p\nq\nr"},
		{"n\x00ul", 0, "n\ufffdul"},
		{"&lt;&gt", 0, "<>"},
	}
	for _, tc := range tests {
		if got := string(attrValue([]byte(tc.v), tc.quote)); got != tc.want {
			t.Errorf("attrValue(%q, %q) = %q, want %q", tc.v, tc.quote, got, tc.want)
		}
	}
}
