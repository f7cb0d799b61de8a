package robots

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// fixture reads a file from the repository's testdata/robots directory.
func fixture(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "robots", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// check is one question asked of a parsed file: may agent fetch path, and which rule decided
// (rule "" means: no rule matched).
type check struct {
	agent, path string
	allowed     bool
	rule        string
}

func allow(agent, path, rule string) check    { return check{agent, path, true, rule} }
func disallow(agent, path, rule string) check { return check{agent, path, false, rule} }

// conformance holds the RFC 9309 cases: each section's rules and the RFC's own examples.
var conformance = []struct {
	name   string
	body   string // "@name" reads testdata/robots/name
	checks []check
}{
	// §5.1 Simple example.
	{"5.1 simple example", "@rfc9309-5.1.txt", []check{
		disallow("otherbot", "/example/", "Disallow: /example/"),
		disallow("otherbot", "/example/page.html", "Disallow: /example/"),
		disallow("otherbot", "/cat.gif", "Disallow: *.gif$"),
		disallow("otherbot", "/a/b/c.gif", "Disallow: *.gif$"),
		allow("otherbot", "/cat.gif?size=2", ""), // "$" is the end of path and query
		allow("otherbot", "/publications/", "Allow: /publications/"),
		allow("otherbot", "/publications/cat.gif", "Allow: /publications/"), // 14 octets beat 6
		disallow("otherbot", "/example/cat.gif", "Disallow: /example/"),
		allow("otherbot", "/other", ""),
		allow("foobot", "/example/page.html", "Allow: /example/page.html"),
		allow("foobot", "/example/allowed.gif", "Allow: /example/allowed.gif"),
		disallow("foobot", "/example/other.gif", "Disallow: /"),
		disallow("foobot", "/", "Disallow: /"),
		disallow("foobot", "/publications/", "Disallow: /"), // foobot does not get the * group
		disallow("barbot", "/example/page.html", "Disallow: /example/page.html"),
		disallow("bazbot", "/example/page.html", "Disallow: /example/page.html"),
		allow("barbot", "/example/other", ""),
		allow("bazbot", "/cat.gif", ""),
		allow("quxbot", "/example/page.html", ""), // empty last group: everything allowed
		allow("quxbot", "/cat.gif", ""),
	}},
	// §5.2 Longest match.
	{"5.2 longest match", "@rfc9309-5.2.txt", []check{
		disallow("foobot", "/example/page/disallowed.gif", "Disallow: /example/page/disallowed.gif"),
		allow("foobot", "/example/page/other.gif", "Allow: /example/page/"),
		allow("foobot", "/example/page/", "Allow: /example/page/"),
		allow("foobot", "/example/", ""),
	}},
	// §2.2.1: groups for the same product token are merged.
	{"2.2.1 groups merged", "user-agent: ExampleBot\ndisallow: /foo\ndisallow: /bar\n\nuser-agent: ExampleBot\ndisallow: /baz\n", []check{
		disallow("ExampleBot", "/foo", "Disallow: /foo"),
		disallow("ExampleBot", "/bar", "Disallow: /bar"),
		disallow("examplebot", "/baz", "Disallow: /baz"),
		allow("ExampleBot", "/qux", ""),
	}},
	// §2.2.1: no group of its own → the "*" group; the "*" group is not added to a named one.
	{"2.2.1 star fallback", "user-agent: *\ndisallow: /foo\ndisallow: /bar\n\nuser-agent: BazBot\ndisallow: /baz\n", []check{
		disallow("ExampleBot", "/foo", "Disallow: /foo"),
		allow("ExampleBot", "/baz", ""),
		allow("BazBot", "/foo", ""),
		disallow("bazbot", "/baz", "Disallow: /baz"),
	}},
	{"2.2.1 star groups merged", "User-agent: *\nDisallow: /a\n\nUser-agent: x\nDisallow: /x\n\nUser-agent: *\nDisallow: /b\n", []check{
		disallow("crawl", "/a", "Disallow: /a"),
		disallow("crawl", "/b", "Disallow: /b"),
		allow("crawl", "/x", ""),
	}},
	// §2.2.1: product tokens match whole and case-insensitively (temoto: prefix).
	{"2.2.1 product token whole", "User-agent: Foo\nDisallow: /\n", []check{
		allow("FooBot", "/x", ""),
		disallow("foo", "/x", "Disallow: /"),
		disallow("FOO", "/x", "Disallow: /"),
		disallow("Foo/2.0 (+https://example.com/bot)", "/x", "Disallow: /"), // reduced by ProductToken
		allow("Fo", "/x", ""),
	}},
	{"2.2.1 user-agent value with version", "User-agent: FooBot/1.2 (compatible)\nDisallow: /v\n", []check{
		disallow("foobot", "/v", "Disallow: /v"),
		allow("foo", "/v", ""),
	}},
	{"2.2.1 no matching group and no star", "User-agent: a\nDisallow: /\n", []check{
		allow("crawl", "/", ""),
		disallow("a", "/", "Disallow: /"),
	}},
	{"2.2.1 no groups at all", "# nothing\nSitemap: https://example.com/s.xml\n", []check{
		allow("crawl", "/", ""),
	}},
	{"2.2.1 empty file", "", []check{allow("crawl", "/x", "")}},
	{"2.2.1 group names a token and star", "User-agent: crawl\nUser-agent: *\nDisallow: /x\n", []check{
		disallow("crawl", "/x", "Disallow: /x"),
		disallow("other", "/x", "Disallow: /x"),
	}},
	// §2.1/§2.2 ABNF: user-agent lines (with empty lines between) share a group; a user-agent
	// line after a rule starts a new one; an empty rule still ends the user-agent list.
	{"2.2 consecutive user-agents share a group", "User-agent: a\n\nUser-agent: b\nDisallow: /ab\n", []check{
		disallow("a", "/ab", "Disallow: /ab"),
		disallow("b", "/ab", "Disallow: /ab"),
	}},
	{"2.2 user-agent after rule starts a group", "User-agent: a\nDisallow: /a\nUser-agent: b\nDisallow: /b\n", []check{
		allow("a", "/b", ""),
		disallow("a", "/a", "Disallow: /a"),
		allow("b", "/a", ""),
	}},
	{"2.2 empty disallow ends the user-agent list", "User-agent: a\nDisallow:\nUser-agent: b\nDisallow: /\n", []check{
		allow("a", "/x", ""),
		disallow("b", "/x", "Disallow: /"),
	}},
	{"2.2 crawl-delay ends the user-agent list", "User-agent: a\nCrawl-delay: 3\nUser-agent: b\nDisallow: /\n", []check{
		allow("a", "/x", ""),
		disallow("b", "/x", "Disallow: /"),
	}},
	// §2.2.4: other records (Sitemap, unknown) do not end a group.
	{"2.2.4 sitemap does not end a group", "User-agent: a\nDisallow: /x\nSitemap: https://example.com/s.xml\nFoo: bar\nDisallow: /y\n", []check{
		disallow("a", "/x", "Disallow: /x"),
		disallow("a", "/y", "Disallow: /y"),
	}},
	{"2.2.4 sitemap between user-agents", "User-agent: a\nSitemap: https://example.com/s.xml\nUser-agent: b\nDisallow: /z\n", []check{
		disallow("a", "/z", "Disallow: /z"),
		disallow("b", "/z", "Disallow: /z"),
	}},
	// §2.2.2: rules before the first user-agent line are ignored, the rest is kept.
	{"2.2.2 rule before first user-agent", "Disallow: /x\nAllow: /y\nCrawl-delay: 9\nUser-agent: *\nDisallow: /y\n", []check{
		allow("crawl", "/x", ""),
		disallow("crawl", "/y", "Disallow: /y"),
	}},
	// §2.2.2: matching starts at the first octet, is case-sensitive, most octets win, allow
	// wins ties, file order does not matter.
	{"2.2.2 prefix from first octet", "User-agent: *\nDisallow: /a\n", []check{
		disallow("crawl", "/a", "Disallow: /a"),
		disallow("crawl", "/ab", "Disallow: /a"),
		disallow("crawl", "/a/b?c", "Disallow: /a"),
		allow("crawl", "/b/a", ""),
		disallow("crawl", "a", "Disallow: /a"), // missing "/" added
	}},
	{"2.2.2 case-sensitive", "User-agent: *\nDisallow: /Private\n", []check{
		allow("crawl", "/private", ""),
		disallow("crawl", "/Private/x", "Disallow: /Private"),
	}},
	{"2.2.2 allow wins equal length (allow first)", "User-agent: *\nAllow: /a\nDisallow: /a\n", []check{
		allow("crawl", "/a", "Allow: /a"),
	}},
	{"2.2.2 allow wins equal length (disallow first)", "User-agent: *\nDisallow: /a\nAllow: /a\n", []check{
		allow("crawl", "/a", "Allow: /a"),
	}},
	{"2.2.2 allow wins equal length with wildcards", "User-agent: *\nDisallow: /*.x\nAllow: /ab.x\n", []check{
		allow("crawl", "/ab.x", "Allow: /ab.x"),
		disallow("crawl", "/ac.x", "Disallow: /*.x"),
	}},
	{"2.2.2 longest match regardless of order", "User-agent: *\nAllow: /a/\nDisallow: /a/b\nDisallow: /\nAllow: /a/b/c\n", []check{
		allow("crawl", "/a/x", "Allow: /a/"),
		disallow("crawl", "/a/bx", "Disallow: /a/b"),
		allow("crawl", "/a/b/c/d", "Allow: /a/b/c"),
		disallow("crawl", "/z", "Disallow: /"),
	}},
	{"2.2.2 empty disallow matches nothing", "User-agent: *\nDisallow:\n", []check{
		allow("crawl", "/", ""),
		allow("crawl", "/x", ""),
	}},
	{"2.2.2 empty allow matches nothing", "User-agent: *\nDisallow: /\nAllow:\n", []check{
		disallow("crawl", "/x", "Disallow: /"),
	}},
	{"2.2.2 robots.txt always allowed", "User-agent: *\nDisallow: /\nDisallow: /robots.txt\n", []check{
		allow("crawl", "/robots.txt", ""),
		allow("crawl", "/robots%2Etxt", ""), // same path after decoding an unreserved octet
		disallow("crawl", "/robots.txt.bak", "Disallow: /robots.txt"),
	}},
	{"2.2.2 value without leading slash", "User-agent: *\nDisallow: private/\n", []check{
		disallow("crawl", "/private/x", "Disallow: private/"),
	}},
	// §2.2.2 table: percent-encoding. Each row: rule written one way, URL the other.
	{"2.2.2 table row 1", "User-agent: *\nDisallow: /foo/bar?baz=quz\n", []check{
		disallow("crawl", "/foo/bar?baz=quz", "Disallow: /foo/bar?baz=quz"),
		allow("crawl", "/foo/bar?baz=qu", ""),
	}},
	{"2.2.2 table row 2 (rule unencoded)", "User-agent: *\nDisallow: /foo/bar?baz=https://foo.bar\n", []check{
		disallow("crawl", "/foo/bar?baz=https%3A%2F%2Ffoo.bar", "Disallow: /foo/bar?baz=https://foo.bar"),
		disallow("crawl", "/foo/bar?baz=https://foo.bar", "Disallow: /foo/bar?baz=https://foo.bar"),
		disallow("crawl", "/foo/bar?baz=https%3a%2f%2ffoo.bar", "Disallow: /foo/bar?baz=https://foo.bar"),
	}},
	{"2.2.2 table row 2 (rule encoded)", "User-agent: *\nDisallow: /foo/bar?baz=https%3A%2F%2Ffoo.bar\n", []check{
		disallow("crawl", "/foo/bar?baz=https://foo.bar", "Disallow: /foo/bar?baz=https%3A%2F%2Ffoo.bar"),
	}},
	{"2.2.2 table row 3 (raw UTF-8 rule)", "User-agent: *\nDisallow: /foo/bar/ツ\n", []check{
		disallow("crawl", "/foo/bar/%E3%83%84", "Disallow: /foo/bar/ツ"),
		disallow("crawl", "/foo/bar/%e3%83%84", "Disallow: /foo/bar/ツ"),
		disallow("crawl", "/foo/bar/ツ", "Disallow: /foo/bar/ツ"),
		allow("crawl", "/foo/bar/%E3%83", ""),
	}},
	{"2.2.2 table row 4 (encoded rule)", "User-agent: *\nDisallow: /foo/bar/%E3%83%84\n", []check{
		disallow("crawl", "/foo/bar/%E3%83%84", "Disallow: /foo/bar/%E3%83%84"),
		disallow("crawl", "/foo/bar/ツ", "Disallow: /foo/bar/%E3%83%84"),
	}},
	{"2.2.2 table row 5 (unreserved octets decoded)", "User-agent: *\nDisallow: /foo/bar/%62%61%7A\n", []check{
		disallow("crawl", "/foo/bar/baz", "Disallow: /foo/bar/%62%61%7A"),
		disallow("crawl", "/foo/bar/%62%61%7a", "Disallow: /foo/bar/%62%61%7A"),
		disallow("crawl", "/foo/bar/b%61z", "Disallow: /foo/bar/%62%61%7A"),
	}},
	{"2.2.2 unreserved in the URL only", "User-agent: *\nDisallow: /~user/\n", []check{
		disallow("crawl", "/%7Euser/x", "Disallow: /~user/"),
		disallow("crawl", "/%7euser/x", "Disallow: /~user/"),
	}},
	{"2.2.2 reserved octets stay distinct", "User-agent: *\nDisallow: /a%2Fb\n", []check{
		disallow("crawl", "/a%2fb", "Disallow: /a%2Fb"),
		allow("crawl", "/a/b", ""),
	}},
	{"2.2.2 hex case", "User-agent: *\nDisallow: /a%aa\n", []check{
		disallow("crawl", "/a%AA", "Disallow: /a%aa"),
		disallow("crawl", "/a%aa", "Disallow: /a%aa"),
		disallow("crawl", "/a\xaa", "Disallow: /a%aa"),
	}},
	{"2.2.2 stray percent", "User-agent: *\nDisallow: /100%\n", []check{
		disallow("crawl", "/100%25", "Disallow: /100%"),
		disallow("crawl", "/100%zz", "Disallow: /100%"),
		allow("crawl", "/100", ""),
	}},
	{"2.2.2 space in rule", "User-agent: *\nDisallow: /a b\n", []check{
		disallow("crawl", "/a%20b", "Disallow: /a b"),
	}},
	// §2.2.3 special characters.
	{"2.2.3 # comment", "User-agent: *\ndisallow: / # comment in line\n# comment on its own line\nallow: /ok#no space before\n", []check{
		disallow("crawl", "/x", "Disallow: /"),
		allow("crawl", "/ok#frag", "Allow: /ok"),
		allow("crawl", "/okay", "Allow: /ok"),
	}},
	{"2.2.3 $ end of pattern", "User-agent: *\nDisallow: /\nallow: /this/path/exactly$\n", []check{
		allow("crawl", "/this/path/exactly", "Allow: /this/path/exactly$"),
		disallow("crawl", "/this/path/exactly/more", "Disallow: /"),
		disallow("crawl", "/this/path/exactly?q", "Disallow: /"),
	}},
	{"2.2.3 * any octets", "User-agent: *\nDisallow: /\nallow: /this/*/exactly\n", []check{
		allow("crawl", "/this/a/exactly", "Allow: /this/*/exactly"),
		allow("crawl", "/this/a/b/c/exactly/more", "Allow: /this/*/exactly"),
		disallow("crawl", "/this/exactly", "Disallow: /"),
		disallow("crawl", "/that/a/exactly", "Disallow: /"),
	}},
	{"2.2.3 %2A is a literal star", "User-agent: *\nDisallow: /\nAllow: /path/file-with-a-%2A.html\n", []check{
		allow("crawl", "/path/file-with-a-*.html", "Allow: /path/file-with-a-%2A.html"),
		allow("crawl", "/path/file-with-a-%2a.html", "Allow: /path/file-with-a-%2A.html"),
		disallow("crawl", "/path/file-with-a-x.html", "Disallow: /"),
	}},
	{"2.2.3 %24 is a literal dollar", "User-agent: *\nDisallow: /\nAllow: /path/foo-%24\n", []check{
		allow("crawl", "/path/foo-$", "Allow: /path/foo-%24"),
		allow("crawl", "/path/foo-$bar", "Allow: /path/foo-%24"),
		disallow("crawl", "/path/foo-", "Disallow: /"),
	}},
	// Wildcards, the ways temoto gets them wrong.
	{"wildcard anchored at the start", "User-agent: *\nDisallow: /private*/\n", []check{
		allow("crawl", "/public/private1/", ""),
		disallow("crawl", "/private1/", "Disallow: /private*/"),
		disallow("crawl", "/private/", "Disallow: /private*/"),
		allow("crawl", "/private", ""),
	}},
	{"$ inside a pattern is literal", "User-agent: *\nDisallow: /a$b\nDisallow: /c$$\n", []check{
		disallow("crawl", "/a$b", "Disallow: /a$b"),
		disallow("crawl", "/a%24b/x", "Disallow: /a$b"),
		allow("crawl", "/a", ""),
		disallow("crawl", "/c$", "Disallow: /c$$"),
		allow("crawl", "/c$x", ""),
	}},
	{"wildcard length is the rule's", "User-agent: *\nDisallow: /*.*.*.\nAllow: /a.b.c.d\n", []check{
		allow("crawl", "/a.b.c.d", "Allow: /a.b.c.d"),
		disallow("crawl", "/x.y.z.w", "Disallow: /*.*.*."),
	}},
	{"wildcards", "User-agent: *\nDisallow: /*.php$\nDisallow: /fish*\nDisallow: /*?*sort=\nAllow: /$\nDisallow: /*\n", []check{
		disallow("crawl", "/index.php", "Disallow: /*.php$"),
		disallow("crawl", "/index.php?x=1", "Disallow: /*"), // $ failed; only /* is left
		disallow("crawl", "/fish", "Disallow: /fish*"),
		disallow("crawl", "/fishheads/x", "Disallow: /fish*"),
		disallow("crawl", "/list?a=1&sort=asc", "Disallow: /*?*sort="),
		allow("crawl", "/", "Allow: /$"),
		disallow("crawl", "/x", "Disallow: /*"),
	}},
	{"wildcard crosses into the query", "User-agent: *\nDisallow: /*/edit\n", []check{
		disallow("crawl", "/page/edit", "Disallow: /*/edit"),
		disallow("crawl", "/page?next=/edit", "Disallow: /*/edit"),
		disallow("crawl", "/page?next=%2Fedit", "Disallow: /*/edit"),
		allow("crawl", "/page%2Fedit", ""), // in the path an escaped "/" is not a "/"
	}},
	// §2.3.1.5 / leniency: one bad line never costs the rest of the file.
	{"malformed lines are skipped", "User-agent: *\nCrawl-delay: 1s\nthis is not a record\n:::\nDisallow: /x\n", []check{
		disallow("crawl", "/x", "Disallow: /x"),
	}},
	{"keys case-insensitive, no space after colon, typos", "USER-AGENT:*\nDISALLOW:/a\ndissallow: /b\nDisallow /c\nuseragent: u\nDisalow: /d\n", []check{
		disallow("crawl", "/a", "Disallow: /a"),
		disallow("crawl", "/b", "Disallow: /b"),
		disallow("crawl", "/c", "Disallow: /c"),
		disallow("u", "/d", "Disallow: /d"),
	}},
	{"non-ASCII rule", "User-agent: *\nDisallow: /ツ\n", []check{
		disallow("crawl", "/%E3%83%84", "Disallow: /ツ"),
		disallow("crawl", "/%E3%83%84/x?y", "Disallow: /ツ"),
	}},
}

func TestConformance(t *testing.T) {
	for _, tc := range conformance {
		t.Run(tc.name, func(t *testing.T) {
			body := tc.body
			if name, ok := strings.CutPrefix(body, "@"); ok {
				body = fixture(t, name)
			}
			r := Parse([]byte(body))
			for _, c := range tc.checks {
				v := r.Test(c.agent, c.path)
				if v.Allowed != c.allowed || v.Rule != c.rule {
					t.Errorf("Test(%q, %q) = %+v, want allowed=%v rule %q", c.agent, c.path, v, c.allowed, c.rule)
				}
				if (v.Rule == "") != (v.Line == 0) {
					t.Errorf("Test(%q, %q) = %+v: Rule and Line disagree", c.agent, c.path, v)
				}
			}
		})
	}
}

func TestVerdictLineAndGroup(t *testing.T) {
	// BOM, CRLF, lone CR, lone LF, an empty CRLF line, and no final newline.
	body := "\xEF\xBB\xBFUser-agent: a\r\nDisallow: /a\rDisallow: /b\nDisallow: /c\r\n\r\nDisallow: /d"
	r := Parse([]byte(body))
	for _, tc := range []struct {
		path string
		line int
	}{{"/a", 2}, {"/b", 3}, {"/c", 4}, {"/d", 6}} {
		v := r.Test("a", tc.path)
		want := Verdict{Allowed: false, Rule: "Disallow: " + tc.path, Line: tc.line, Group: "User-agent: a"}
		if v != want {
			t.Errorf("Test(a, %s) = %+v, want %+v", tc.path, v, want)
		}
	}

	r = Parse([]byte(fixture(t, "rfc9309-5.1.txt")))
	for _, tc := range []struct {
		agent, path string
		want        Verdict
	}{
		{"bazbot", "/example/page.html", Verdict{false, "Disallow: /example/page.html", 11, "User-agent: barbot, User-agent: bazbot"}},
		{"bazbot", "/x", Verdict{true, "", 0, "User-agent: barbot, User-agent: bazbot"}},
		{"quxbot", "/x", Verdict{true, "", 0, "User-agent: quxbot"}},
		{"other", "/a.gif", Verdict{false, "Disallow: *.gif$", 2, "User-agent: *"}},
	} {
		if v := r.Test(tc.agent, tc.path); v != tc.want {
			t.Errorf("Test(%s, %s) = %+v, want %+v", tc.agent, tc.path, v, tc.want)
		}
	}

	// Merged groups: the rule's own group is named; with no rule, all of them.
	r = Parse([]byte("User-agent: x\nDisallow: /a\n\nUser-agent: X\nUser-agent: y\nDisallow: /b\n"))
	if v := r.Test("x", "/b"); v.Group != "User-agent: X, User-agent: y" || v.Line != 6 {
		t.Errorf("merged, rule in second group: %+v", v)
	}
	if v := r.Test("x", "/c"); v.Group != "User-agent: x, User-agent: X, User-agent: y" {
		t.Errorf("merged, no rule: %+v", v)
	}
	// Equal rules: the earlier line is reported.
	r = Parse([]byte("User-agent: *\nDisallow: /a\nDisallow: /a\n"))
	if v := r.Test("crawl", "/a"); v.Line != 2 {
		t.Errorf("duplicate rules: %+v, want line 2", v)
	}
}

func TestParseSizeLimit(t *testing.T) {
	head := "User-agent: *\nDisallow: /early\n"
	last := "Disallow: /last\n"
	// p fills the limit up to exactly len(last) bytes before MaxSize.
	p := head + "#" + strings.Repeat("x", MaxSize-len(last)-len(head)-2) + "\n"
	if len(p)+len(last) != MaxSize {
		t.Fatalf("fixture arithmetic: %d", len(p)+len(last))
	}
	for _, tc := range []struct {
		name       string
		body       string
		disallowed []string
		allowed    []string
	}{
		{"line ends exactly at MaxSize", p + last, []string{"/early", "/last"}, nil},
		{"lines after MaxSize are ignored", p + last + "Disallow: /after\n", []string{"/last"}, []string{"/after"}},
		{"line cut by MaxSize is dropped", p + "Disallow: /lastXYZ\n", nil, []string{"/last", "/lastX", "/lastXYZ"}},
		{"last line without newline under MaxSize", p + "Disallow: /last", []string{"/last"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Parse([]byte(tc.body))
			for _, path := range append(tc.disallowed, "/early") {
				if r.Test("crawl", path).Allowed {
					t.Errorf("%s allowed", path)
				}
			}
			for _, path := range tc.allowed {
				if v := r.Test("crawl", path); !v.Allowed {
					t.Errorf("%s disallowed by %+v", path, v)
				}
			}
		})
	}
}

func TestFromResponse(t *testing.T) {
	body := []byte("User-agent: *\nDisallow: /private\n")
	for _, tc := range []struct {
		status      int
		unreachable bool
		private     bool // /private allowed?
		public      bool // /public allowed?
	}{
		{200, false, false, true},
		{204, false, false, true},
		{301, false, true, true}, // redirects the caller did not follow: unavailable
		{308, false, true, true},
		{400, false, true, true},
		{401, false, true, true},
		{403, false, true, true},
		{404, false, true, true},
		{410, false, true, true},
		{429, true, false, false},
		{499, false, true, true},
		{500, true, false, false},
		{503, true, false, false},
		{599, true, false, false},
		{0, true, false, false}, // network error
		{100, true, false, false},
		{600, true, false, false},
	} {
		t.Run(fmt.Sprint(tc.status), func(t *testing.T) {
			r := FromResponse(tc.status, body)
			if r.Unreachable() != tc.unreachable {
				t.Errorf("Unreachable = %v", r.Unreachable())
			}
			if got := r.Test("crawl", "/private").Allowed; got != tc.private {
				t.Errorf("/private allowed = %v", got)
			}
			if got := r.Test("crawl", "/public").Allowed; got != tc.public {
				t.Errorf("/public allowed = %v", got)
			}
			if !r.Test("crawl", "/robots.txt").Allowed {
				t.Error("/robots.txt must always be allowed")
			}
		})
	}
}

func TestAllowAllDisallowAll(t *testing.T) {
	for _, tc := range []struct {
		name        string
		r           *Robots
		allowed     bool
		unreachable bool
	}{
		{"AllowAll", AllowAll(), true, false},
		{"zero value", &Robots{}, true, false},
		{"DisallowAll", DisallowAll(), false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if v := tc.r.Test("crawl", "/x"); v.Allowed != tc.allowed || v.Rule != "" || v.Line != 0 || v.Group != "" {
				t.Errorf("Test = %+v", v)
			}
			if tc.r.Unreachable() != tc.unreachable {
				t.Errorf("Unreachable = %v", tc.r.Unreachable())
			}
			if !tc.r.Test("crawl", "/robots.txt").Allowed {
				t.Error("/robots.txt disallowed")
			}
			if d, ok := tc.r.CrawlDelay("crawl"); ok || d != 0 {
				t.Errorf("CrawlDelay = %v, %v", d, ok)
			}
			if s := tc.r.Sitemaps(); len(s) != 0 {
				t.Errorf("Sitemaps = %v", s)
			}
		})
	}
}

func TestCrawlDelay(t *testing.T) {
	body := "Crawl-delay: 99\n" + // before any group: ignored
		"User-agent: a\nCrawl-delay: 2\nCrawl-delay: 0.5\n" +
		"User-agent: b\nCrawl-delay: 1s\nCrawl-delay: -1\nCrawl-delay: NaN\nCrawl-delay: inf\nDisallow: /\n" +
		"User-agent: c\nCrawl-delay: 1e300\n" +
		"User-agent: a\nCrawl-delay: 3\n" +
		"User-agent: *\nCrawl-delay: 7\n"
	r := Parse([]byte(body))
	for _, tc := range []struct {
		agent string
		want  time.Duration
		ok    bool
	}{
		{"a", 3 * time.Second, true},          // merged groups: the largest
		{"b", 0, false},                       // only invalid values; no fallback to "*"
		{"c", time.Duration(1<<63 - 1), true}, // clamped, not overflowed
		{"other", 7 * time.Second, true},
	} {
		d, ok := r.CrawlDelay(tc.agent)
		if d != tc.want || ok != tc.ok {
			t.Errorf("CrawlDelay(%q) = %v, %v; want %v, %v", tc.agent, d, ok, tc.want, tc.ok)
		}
	}
	r = Parse([]byte("User-agent: a\nCrawl-delay: 0.25\n"))
	if d, ok := r.CrawlDelay("A"); d != 250*time.Millisecond || !ok {
		t.Errorf("fractional: %v %v", d, ok)
	}
	if d, ok := r.CrawlDelay("zzz"); d != 0 || ok {
		t.Errorf("no group: %v %v", d, ok)
	}
}

func TestSitemaps(t *testing.T) {
	r := Parse([]byte(fixture(t, "messy.txt")))
	want := []string{"https://example.com/sitemap.xml", "https://example.com/news.xml"}
	got := r.Sitemaps()
	if !slices.Equal(got, want) {
		t.Fatalf("Sitemaps = %q, want %q", got, want)
	}
	got[0] = "mutated"
	if r.Sitemaps()[0] != want[0] {
		t.Error("Sitemaps returned internal slice")
	}
	r = Parse([]byte("Sitemap: https://a/1\nsite-map: https://a/2\nSitemap: https://a/1\nSitemap:\n"))
	if got := r.Sitemaps(); !slices.Equal(got, []string{"https://a/1", "https://a/2"}) {
		t.Errorf("Sitemaps = %q", got)
	}
}

func TestMessyFixture(t *testing.T) {
	r := Parse([]byte(fixture(t, "messy.txt")))
	for _, c := range []check{
		allow("crawl", "/orphan", ""),
		disallow("crawl", "/private1/x", "Disallow: /private*/"),
		allow("crawl", "/private/open/x", "Allow: /private/open/"),
		disallow("crawl", "/private/other", "Disallow: /private*/"),
		disallow("other", "/doc.pdf", "Disallow: /*.pdf$"),
		allow("crawl", "/doc.pdf?page=2", ""),
		disallow("crawl", "/%E3%83%84", "Disallow: /ツ"),
		disallow("crawl", "/search", "Disallow: /search"),
		disallow("crawl", "/typo", "Disallow: /typo"), // a misspelt key is shown canonically
		disallow("nobody", "/", "Disallow: /"),
	} {
		want := c.rule
		if v := r.Test(c.agent, c.path); v.Allowed != c.allowed || v.Rule != want {
			t.Errorf("Test(%q, %q) = %+v, want %v %q", c.agent, c.path, v, c.allowed, want)
		}
	}
	if d, ok := r.CrawlDelay("crawl"); d != 2500*time.Millisecond || !ok {
		t.Errorf("CrawlDelay = %v %v", d, ok)
	}
}

func TestTestURL(t *testing.T) {
	r := Parse([]byte("User-agent: *\nDisallow: /ツ\nDisallow: /q?x=1\nDisallow: /$\n"))
	for _, tc := range []struct {
		raw     string
		allowed bool
	}{
		{"https://example.com/ツ/a", false},
		{"https://example.com/%E3%83%84", false},
		{"https://example.com/q?x=1#frag", false},
		{"https://example.com/q#x=1", true},
		{"https://example.com", false}, // empty path is "/"
		{"https://example.com/robots.txt", true},
		{"https://example.com/other", true},
	} {
		u, err := url.Parse(tc.raw)
		if err != nil {
			t.Fatal(err)
		}
		if v := r.TestURL("crawl", u); v.Allowed != tc.allowed {
			t.Errorf("TestURL(%s) = %+v, want allowed=%v", tc.raw, v, tc.allowed)
		}
	}
}

func TestProductToken(t *testing.T) {
	for in, want := range map[string]string{
		"crawl/0.1 (+https://example.com/bot)":    "crawl",
		"crawl":                                   "crawl",
		"  Example_Bot-2":                         "Example_Bot-",
		"Mozilla/5.0 (compatible; Googlebot/2.1)": "Mozilla",
		"*":    "",
		"":     "",
		"ツbot": "",
	} {
		if got := ProductToken(in); got != want {
			t.Errorf("ProductToken(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCanonIdempotent(t *testing.T) {
	for _, s := range []string{"/a%2fb?c=d/e:f@g?h", "/a%3F?%3f%3F", "/ツ%e3%83%84", "/%7e%41%zz%", "/*$x", "/a b\t\x00\xff"} {
		c := canonPath(s)
		if c2 := canonPath(c); c2 != c {
			t.Errorf("canonPath(%q) = %q, but canonPath of that = %q", s, c, c2)
		}
		if !isCanonical(c, false) {
			t.Errorf("isCanonical(%q) = false", c)
		}
	}
	if got, want := canonPath("/a%2fb?c=d%2Fe%3af%40g%3Fh/%26"), "/a%2Fb?c=d/e:f@g?h/%26"; got != want {
		t.Errorf("canonPath = %q, want %q", got, want)
	}
}

// TestConcurrentUse runs Test from many goroutines; -race checks that Robots is read-only.
func TestConcurrentUse(t *testing.T) {
	r := Parse([]byte(fixture(t, "rfc9309-5.1.txt")))
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 200 {
				agent := []string{"foobot", "barbot", "other"}[(i+j)%3]
				r.Test(agent, fmt.Sprintf("/example/%d.gif", j))
				r.CrawlDelay(agent)
				r.Sitemaps()
			}
		})
	}
	wg.Wait()
}

// BenchmarkTest measures one decision against the messy fixture.
func BenchmarkTest(b *testing.B) {
	r := Parse([]byte(fixture(b, "messy.txt")))
	for b.Loop() {
		r.Test("crawl", "/private/open/some/long/path/page.html?x=1&y=2")
	}
}

// BenchmarkParseMax parses a MaxSize file of rules.
func BenchmarkParseMax(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("User-agent: *\n")
	for i := 0; sb.Len() < MaxSize; i++ {
		fmt.Fprintf(&sb, "Disallow: /dir%d/*.php$\n", i)
	}
	body := []byte(sb.String())
	b.SetBytes(int64(len(body)))
	var r *Robots
	for b.Loop() {
		r = Parse(body)
	}
	if r.Test("crawl", "/dir7/x.php").Allowed {
		b.Fatal("rule not parsed")
	}
}

func TestAgentToken(t *testing.T) {
	for in, want := range map[string]string{
		"Mozilla/5.0 (compatible; MyBot/1.0; +https://example.com/bot)":                          "MyBot",
		"Mozilla/5.0 (compatible;MyBot/1.0)":                                                     "MyBot",
		"Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; bingbot/2.0) Chrome/116": "bingbot",
		"Mozilla/5.0 (X11; Linux x86_64) MyBot/2.0":                                              "MyBot",
		"crawl/0.1 (+contact: set --user-agent to name yourself)":                                "crawl",
		"MyBot":       "MyBot",
		"Mozilla/5.0": "Mozilla",
		"":            "",
	} {
		if got := AgentToken(in); got != want {
			t.Errorf("AgentToken(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestPartialBOM: a robots.txt that starts with the first one or two bytes of a UTF-8 byte
// order mark is read as if they were not there, so its first line still opens a group.
func TestPartialBOM(t *testing.T) {
	for _, bom := range []string{"\xEF\xBB\xBF", "\xEF\xBB", "\xEF", ""} {
		r := Parse([]byte(bom + "User-agent: a\nDisallow: /private\n"))
		if v := r.Test("a", "/private/x"); v.Allowed || v.Line != 2 {
			t.Errorf("body starting %q: Test(a, /private/x) = %+v, want disallowed by line 2", bom, v)
		}
	}
}
