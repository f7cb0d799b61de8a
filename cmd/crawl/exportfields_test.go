package main

import (
	"bytes"
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"flag"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/net/html"
	"golang.org/x/net/html/charset"
)

var (
	docsiteDir = flag.String("docsite.dir", "../../testdata/docsite", "TestExportFieldH1MatchesTokenizer: the documentation site to serve and crawl (a directory of HTML files, e.g. an installed manual)")
	docsiteMax = flag.Int("docsite.max-pages", 5000, "TestExportFieldH1MatchesTokenizer: --max-pages of the crawl")
)

// TestExportFieldH1MatchesTokenizer crawls a documentation site served from disk on loopback
// (testdata/docsite: headings in the shapes Sphinx, mkdocs, rustdoc and books emit; or any
// directory given by -docsite.dir) and checks that --field h1=h1 gives, for at least 99% of
// the HTML pages, what an independent reading gives: the text tokens between the first <h1>
// start tag and its end tag, from x/net/html's tokenizer (no tree construction, no CSS), ASCII
// whitespace collapsed. A page without an h1 must have a null field.
func TestExportFieldH1MatchesTokenizer(t *testing.T) {
	files := http.FileServer(http.Dir(*docsiteDir))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, ".xhtml") { // not in every mime table
			w.Header().Set("Content-Type", "application/xhtml+xml")
		}
		files.ServeHTTP(w, r)
	}))
	defer srv.Close()
	var errb strings.Builder
	dir := t.TempDir() + "/data"
	args := []string{"--seeds", writeSeeds(t, []string{srv.URL + "/"}), "--data", dir, "--quiet", "--initial-rate", "1000", "--max-pages", strconv.Itoa(*docsiteMax)}
	if code := runCmd(args, &errb, &errb); code != exitOK {
		t.Fatalf("crawl run: exit %d\n%s", code, errb.String())
	}
	code, stdout, stderr := runExport(t, "--data", dir, "--format", "jsonl", "--out", "-", "--status", "200", "--field", "h1=h1")
	if code != exitOK {
		t.Fatalf("export: exit %d: %s", code, stderr)
	}
	pages, same, withH1 := 0, 0, 0
	want := map[string]*string{} // by URL, for the CSV below
	for line := range strings.Lines(stdout) {
		var p struct {
			URL         string
			ContentType string `json:"content_type"`
			Headers     http.Header
			Body        string
			BodyBase64  bool `json:"body_base64"`
			Fields      *struct{ H1 *string }
		}
		if err := json.Unmarshal([]byte(line), &p); err != nil {
			t.Fatal(err)
		}
		if p.ContentType != "text/html" && p.ContentType != "application/xhtml+xml" {
			if p.Fields != nil {
				t.Errorf("%s (%s): fields %v on a page that is not HTML", p.URL, p.ContentType, p.Fields)
			}
			continue
		}
		body := []byte(p.Body)
		if p.BodyBase64 {
			var err error
			if body, err = base64.StdEncoding.DecodeString(p.Body); err != nil {
				t.Fatal(err)
			}
		}
		pages++
		h1, ok := tokenizerH1(t, body, p.Headers.Get("Content-Type"))
		if ok {
			withH1++
		}
		if p.Fields == nil {
			t.Errorf("%s: no fields", p.URL)
			continue
		}
		want[p.URL] = p.Fields.H1
		got := p.Fields.H1
		if ok && got != nil && *got == h1 || !ok && got == nil {
			same++
		} else {
			t.Logf("%s: --field h1=h1 gives %s, the tokenizer %q (found: %v)", p.URL, quoteOrNull(got), h1, ok)
		}
	}
	t.Logf("%d of %d HTML pages the same (%d with an h1)", same, pages, withH1)
	if pages == 0 || float64(same) < 0.99*float64(pages) {
		t.Errorf("%d of %d HTML pages have the tokenizer's first h1, want at least 99%%", same, pages)
	}
	if *docsiteDir == flag.Lookup("docsite.dir").DefValue && (pages != 19 || withH1 != 18) {
		t.Errorf("testdata/docsite: %d HTML pages, %d with an h1; want 19 and 18 (did the crawl miss some?)", pages, withH1)
	}

	// The CSV gives the same values, one row per HTML page.
	code, stdout, stderr = runExport(t, "--data", dir, "--format", "csv", "--out", "-", "--status", "200", "--field", "h1=h1")
	if code != exitOK {
		t.Fatalf("export csv: exit %d: %s", code, stderr)
	}
	rows, err := csv.NewReader(strings.NewReader(stdout)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != pages+1 || strings.Join(rows[0], ",") != "url,h1" {
		t.Fatalf("csv: %d rows (header %q), want %d", len(rows), rows[0], pages+1)
	}
	for _, r := range rows[1:] {
		w, ok := want[r[0]]
		if !ok || w == nil && r[1] != "" || w != nil && *w != r[1] {
			t.Errorf("csv %s: h1 %q, want %s", r[0], r[1], quoteOrNull(w))
		}
	}
}

// tokenizerH1 is the independent reading: the first h1's text tokens, up to its end tag or
// the end of the page, decoded with x/net/html/charset from the Content-Type and any <meta>.
func tokenizerH1(t *testing.T, body []byte, contentType string) (string, bool) {
	t.Helper()
	r, err := charset.NewReader(bytes.NewReader(body), contentType)
	if err != nil {
		t.Fatal(err)
	}
	z := html.NewTokenizer(r)
	var sb strings.Builder
	in := false
	for {
		switch z.Next() {
		case html.ErrorToken:
			return collapseSpaces(sb.String()), in
		case html.StartTagToken:
			if name, _ := z.TagName(); string(name) == "h1" {
				in = true
			}
		case html.EndTagToken:
			if name, _ := z.TagName(); in && string(name) == "h1" {
				return collapseSpaces(sb.String()), true
			}
		case html.TextToken:
			if in {
				sb.Write(z.Text())
			}
		}
	}
}

// collapseSpaces strips ASCII whitespace at the ends of s and collapses its runs to one space.
func collapseSpaces(s string) string {
	return strings.Join(strings.FieldsFunc(s, func(r rune) bool {
		return r == ' ' || r == '\t' || r == '\n' || r == '\f' || r == '\r'
	}), " ")
}

func quoteOrNull(s *string) string {
	if s == nil {
		return "null"
	}
	b, _ := json.Marshal(*s)
	return string(b)
}

func TestExportFieldUsageErrors(t *testing.T) {
	dir := newExportStore(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--format", "jsonl", "--field", "h1=h1[", "--out", "-"}, `--field "h1=h1[": selector "h1["`},
		{[]string{"--format", "jsonl", "--field", "h1", "--out", "-"}, `--field "h1": want NAME=SELECTOR`},
		{[]string{"--format", "csv", "--field", "x=p", "--field", "x=a", "--out", "-"}, `the name "x" is given twice`},
		{[]string{"--format", "csv", "--field", "url=a@href", "--out", "-"}, `--field "url=a": the name url is the first column`},
		{[]string{"--format", "warc", "--field", "h1=h1", "--out", t.TempDir() + "/"}, "--field applies to --format jsonl and csv only"},
	} {
		code, stdout, stderr := runExport(t, append([]string{"--data", dir}, tc.args...)...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) || stdout != "" {
			t.Errorf("%q: exit %d, stderr %q, stdout %q; want exit %d naming %q", tc.args, code, stderr, stdout, exitUsage, tc.want)
		}
	}
}
