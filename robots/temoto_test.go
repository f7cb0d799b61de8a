package robots

import (
	"strings"
	"testing"

	"github.com/temoto/robotstxt"
)

// temotoSays asks github.com/temoto/robotstxt v1.1.2 the question the way a crawler built on it
// would: FromStatusAndBytes, then FindGroup(agent).Test(path). It returns "allowed",
// "disallowed" or "error" (the whole file rejected).
func temotoSays(status int, body, agent, path string) string {
	d, err := robotstxt.FromStatusAndBytes(status, []byte(body))
	if err != nil {
		return "error"
	}
	if d.FindGroup(agent).Test(path) {
		return "allowed"
	}
	return "disallowed"
}

// TestTemotoDeviations pins down each way temoto v1.1.2 departs from RFC 9309, what it says and
// what this package says. If a temoto upgrade fixes one, its row fails here: then delete the row
// and consider using temoto for that part (see doc.go).
func TestTemotoDeviations(t *testing.T) {
	for _, tc := range []struct {
		name        string
		status      int
		body        string
		agent, path string
		temoto      string // what temoto says
		allowed     bool   // what RFC 9309 (and this package) says
	}{
		{"rule before first user-agent rejects the file", 200,
			"Disallow: /x\nUser-agent: *\nDisallow: /y\n", "crawl", "/y", "error", false},
		{"one malformed line rejects the file", 200,
			"User-agent: *\nCrawl-delay: 1s\nDisallow: /y\n", "crawl", "/y", "error", false},
		{"equal length: first listed wins, not allow", 200,
			"User-agent: *\nDisallow: /a\nAllow: /a\n", "crawl", "/a", "disallowed", true},
		{"wildcard length measured on the compiled regexp", 200,
			"User-agent: *\nDisallow: /*.*.*.\nAllow: /a.b.c.d\n", "crawl", "/a.b.c.d", "disallowed", true},
		{"wildcard rule matches in the middle of a path", 200,
			"User-agent: *\nDisallow: /private*/\n", "crawl", "/public/private1/", "disallowed", true},
		{"$ inside a pattern is an anchor", 200,
			"User-agent: *\nDisallow: /a$b\n", "crawl", "/a$b", "allowed", false},
		{"non-ASCII rule not percent-encoded", 200,
			"User-agent: *\nDisallow: /ツ\n", "crawl", "/%E3%83%84", "allowed", false},
		{"%aa and %AA differ", 200,
			"User-agent: *\nDisallow: /a%aa\n", "crawl", "/a%AA", "allowed", false},
		{"unreserved %62 differs from b", 200,
			"User-agent: *\nDisallow: /foo/bar/%62%61%7A\n", "crawl", "/foo/bar/baz", "allowed", false},
		{"%2A in a rule does not match a literal *", 200,
			"User-agent: *\nDisallow: /\nAllow: /file-%2A.html\n", "crawl", "/file-*.html", "disallowed", true},
		{"# is a comment only after whitespace", 200,
			"User-agent: *\nDisallow: /a#b\n", "crawl", "/a/x", "allowed", false},
		{"user-agent matched by prefix", 200,
			"User-agent: Foo\nDisallow: /\n", "FooBot", "/x", "disallowed", true},
		{"user-agent value with a version never matches", 200,
			"User-agent: FooBot/1.2\nDisallow: /\n", "FooBot", "/x", "allowed", false},
		{"empty last group falls back to *", 200,
			"User-agent: *\nDisallow: /\nUser-agent: quxbot\n", "quxbot", "/x", "disallowed", true},
		{"/robots.txt not implicitly allowed", 200,
			"User-agent: *\nDisallow: /\n", "crawl", "/robots.txt", "disallowed", true},
		{"5xx: FindGroup(agent).Test(path) allows", 503,
			"", "crawl", "/x", "allowed", false},
		{"429 treated as allow-all", 429,
			"", "crawl", "/x", "allowed", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := temotoSays(tc.status, tc.body, tc.agent, tc.path); got != tc.temoto {
				t.Errorf("temoto says %s, table says %s: has temoto changed?", got, tc.temoto)
			}
			if v := FromResponse(tc.status, []byte(tc.body)).Test(tc.agent, tc.path); v.Allowed != tc.allowed {
				t.Errorf("we say %+v, want allowed=%v", v, tc.allowed)
			}
		})
	}
}

// TestTemotoCrossCheck runs the conformance cases on which temoto v1.1.2 is right through both
// implementations: an independent second opinion on group selection, prefix matching,
// longest match and the wildcards it handles.
func TestTemotoCrossCheck(t *testing.T) {
	agree := map[string]bool{
		"5.1 simple example":                          true, // except quxbot, see deviations
		"5.2 longest match":                           true,
		"2.2.1 groups merged":                         true,
		"2.2.1 star fallback":                         true,
		"2.2.1 star groups merged":                    true,
		"2.2.1 no matching group and no star":         true,
		"2.2.1 no groups at all":                      true,
		"2.2.1 group names a token and star":          true,
		"2.2 consecutive user-agents share a group":   true,
		"2.2 user-agent after rule starts a group":    true,
		"2.2 empty disallow ends the user-agent list": true,
		"2.2 crawl-delay ends the user-agent list":    true,
		"2.2.4 sitemap does not end a group":          true,
		"2.2.4 sitemap between user-agents":           true,
		"2.2.2 case-sensitive":                        true,
		"2.2.2 longest match regardless of order":     true,
		"2.2.2 empty disallow matches nothing":        true,
		"2.2.2 empty allow matches nothing":           true,
		"2.2.2 value without leading slash":           true,
		"2.2.2 table row 1":                           true,
		"2.2.3 $ end of pattern":                      true,
		"2.2.3 * any octets":                          true,
		"wildcards":                                   true,
	}
	seen := 0
	for _, tc := range conformance {
		if !agree[tc.name] {
			continue
		}
		seen++
		body := tc.body
		if name, ok := strings.CutPrefix(body, "@"); ok {
			body = fixture(t, name)
		}
		t.Run(tc.name, func(t *testing.T) {
			ours := Parse([]byte(body))
			for _, c := range tc.checks {
				if c.agent == "quxbot" {
					continue
				}
				want := map[bool]string{true: "allowed", false: "disallowed"}[c.allowed]
				if got := temotoSays(200, body, c.agent, c.path); got != want {
					t.Errorf("temoto Test(%q, %q) = %s, want %s", c.agent, c.path, got, want)
				}
				if v := ours.Test(c.agent, c.path); v.Allowed != c.allowed {
					t.Errorf("Test(%q, %q) = %+v, want allowed=%v", c.agent, c.path, v, c.allowed)
				}
			}
		})
	}
	if seen != len(agree) {
		t.Fatalf("cross-checked %d cases, want %d: a conformance case was renamed", seen, len(agree))
	}
}
