package robots

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// FuzzParse feeds any bytes to Parse and asks any agent about any path. Plain `go test` runs only
// the seeds below (every file in testdata/robots plus the conformance bodies); run
// `go test -fuzz FuzzParse ./robots` to search further.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("..", "testdata", "robots", "*.txt"))
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, "crawl", "/private/x?y=1")
	}
	for _, tc := range conformance {
		if !strings.HasPrefix(tc.body, "@") && len(tc.checks) > 0 {
			f.Add([]byte(tc.body), tc.checks[0].agent, tc.checks[0].path)
		}
	}
	f.Add([]byte("User-agent: *\nDisallow: /*%\n"), "", "%")
	f.Add([]byte("User-agent:*\rDisallow:****$$\r\n"), "*", "/a?b#c")
	f.Add([]byte("\xEF\xBB\xBF\xFF\xFE\x00:\n:\nuser-agent\nDisallow /a b c"), "x", "")
	f.Add([]byte("User-agent: a\nCrawl-delay: 1e400\nCrawl-delay: -0\n"), "A", "/")
	for _, s := range hostileShapes { // the shapes that made a parser quadratic, cut short
		f.Add(s.body(300), s.agent, s.path)
	}
	f.Add([]byte("User-agent: *\nDisallow: /a\nAllow: /a\nDisallow: /a\nAllow: /%61\n"), "x", "/a")

	f.Fuzz(func(t *testing.T, body []byte, agent, path string) {
		orig := bytes.Clone(body)
		r := Parse(body)
		if !bytes.Equal(body, orig) {
			t.Fatal("Parse modified its input")
		}
		v := r.Test(agent, path)
		if v2 := r.Test(agent, path); v2 != v {
			t.Fatalf("Test not deterministic: %+v then %+v", v, v2)
		}
		switch {
		case v.Rule == "":
			if v.Line != 0 || !v.Allowed {
				t.Fatalf("no rule but %+v", v)
			}
		case v.Allowed && !strings.HasPrefix(v.Rule, "Allow: "),
			!v.Allowed && !strings.HasPrefix(v.Rule, "Disallow: "):
			t.Fatalf("verdict and rule disagree: %+v", v)
		case v.Line < 1 || v.Line > bytes.Count(body, []byte("\n"))+bytes.Count(body, []byte("\r"))+1:
			t.Fatalf("line out of range: %+v", v)
		case v.Group == "":
			t.Fatalf("rule without group: %+v", v)
		}
		if !r.Test(agent, "/robots.txt").Allowed {
			t.Fatal("/robots.txt disallowed")
		}
		if d, ok := r.CrawlDelay(agent); d < 0 || !ok && d != 0 {
			t.Fatalf("CrawlDelay = %v, %v", d, ok)
		}
		_ = r.Sitemaps()

		c := canonPath(path)
		if !isCanonical(c, false) || canonPath(c) != c {
			t.Fatalf("canonPath(%q) = %q is not a fixed point", path, c)
		}
		if w := r.Test(agent, c); w.Allowed != v.Allowed || w.Rule != v.Rule {
			t.Fatalf("Test of canonical path %q = %+v, of %q = %+v", c, w, path, v)
		}

		// The unreachable verdict must not depend on the body.
		if FromResponse(503, body).Test(agent, path).Allowed && canonPath(path) != "/robots.txt" {
			t.Fatal("503 allowed a path")
		}
	})
}

// FuzzMatch checks the backtracking-free wildcard matcher against a regular expression built
// from the same canonical pattern: "^" + segments joined by ".*" + "$" if anchored.
func FuzzMatch(f *testing.F) {
	f.Add("/a*b*c$", "/axxbyyc")
	f.Add("/private*/", "/public/private1/")
	f.Add("*.gif$", "/a.gif.gif")
	f.Add("/a**$", "/a")
	f.Add("/x*x*x", "/xx")
	f.Add("/%E3*%84$", "/ツ")
	f.Add("/"+strings.Repeat("*ab", 50)+"*c$", "/"+strings.Repeat("ab", 200))
	f.Fuzz(func(t *testing.T, value, path string) {
		if value == "" {
			return
		}
		r := newRule(false, value, "Disallow: "+value, 1)
		parts := strings.Split(r.pattern, "*")
		for i, p := range parts {
			parts[i] = regexp.QuoteMeta(p)
		}
		expr := "(?s)^" + strings.Join(parts, ".*")
		if r.anchored {
			expr += "$"
		}
		re := regexp.MustCompile(expr)
		p := canonPath(path)
		if got, want := r.match(p), re.MatchString(p); got != want {
			t.Fatalf("rule %q (pattern %q) on %q: match = %v, regexp %s says %v", value, r.pattern, p, got, expr, want)
		}
	})
}
