package sitemap

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func urlset(n int) string {
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">`)
	for i := range n {
		fmt.Fprintf(&b, "<url><loc> http://s.test/p%d </loc><lastmod>2024-05-0%dT10:00:00+02:00</lastmod></url>\n", i, i%9+1)
	}
	b.WriteString("</urlset>")
	return b.String()
}

func gz(s string) []byte {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	w.Write([]byte(s))
	w.Close()
	return b.Bytes()
}

func TestParse(t *testing.T) {
	k, es, err := Parse([]byte(urlset(3)), Limits{})
	if err != nil || k != URLSet || len(es) != 3 || es[2].Loc != "http://s.test/p2" ||
		!es[0].LastMod.Equal(time.Date(2024, 5, 1, 8, 0, 0, 0, time.UTC)) {
		t.Fatalf("Parse = %v %+v %v", k, es, err)
	}
	idx := `<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><sitemap><loc>http://s.test/a.xml.gz</loc><lastmod>2024-05-01</lastmod></sitemap><sitemap><loc></loc></sitemap></sitemapindex>`
	k, es, err = Parse(gz(idx), Limits{})
	if err != nil || k != Index || len(es) != 1 || es[0].Loc != "http://s.test/a.xml.gz" || es[0].LastMod.IsZero() {
		t.Fatalf("index: %v %+v %v", k, es, err)
	}
	for name, tc := range map[string]struct {
		body []byte
		lim  Limits
		want error
		n    int
	}{
		"html":          {[]byte("<!DOCTYPE html><html><body>x</body></html>"), Limits{}, ErrNotSitemap, 0},
		"text":          {[]byte("just text"), Limits{}, ErrNotSitemap, 0},
		"rss":           {[]byte(`<rss><channel></channel></rss>`), Limits{}, ErrNotSitemap, 0},
		"cut xml":       {[]byte(urlset(5)[:300]), Limits{}, ErrMalformed, 2},
		"bad gzip":      {gz(urlset(5))[:40], Limits{}, ErrMalformed, 0},
		"too many":      {[]byte(urlset(10)), Limits{URLs: 4}, ErrTooBig, 4},
		"too long":      {gz(urlset(10)), Limits{Bytes: 500}, ErrTooBig, 4},
		"other charset": {[]byte(`<?xml version="1.0" encoding="ISO-8859-1"?><urlset></urlset>`), Limits{}, ErrMalformed, 0},
	} {
		t.Run(name, func(t *testing.T) {
			_, es, err := Parse(tc.body, tc.lim)
			if !errors.Is(err, tc.want) || len(es) != tc.n {
				t.Errorf("Parse: %d entries, %v; want %d, %v", len(es), err, tc.n, tc.want)
			}
		})
	}
}

// TestProtocolLimit: the 50,001st URL is cut.
func TestProtocolLimit(t *testing.T) {
	_, es, err := Parse([]byte(urlset(MaxURLs+1)), Limits{})
	if !errors.Is(err, ErrTooBig) || len(es) != MaxURLs || !strings.Contains(err.Error(), "50000") {
		t.Errorf("%d entries, %v", len(es), err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(urlset(2)))
	f.Add(gz(urlset(2)))
	f.Add([]byte(`<sitemapindex><sitemap><loc>x</loc></sitemap></sitemapindex>`))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, es, err := Parse(b, Limits{URLs: 10, Bytes: 1 << 16})
		if len(es) > 10 {
			t.Errorf("%d entries past the limit (%v)", len(es), err)
		}
	})
}

// TestSniff: the kind by the root element alone, gzip or not; 0 for anything else.
func TestSniff(t *testing.T) {
	for name, tc := range map[string]struct {
		body []byte
		want Kind
	}{
		"urlset":         {[]byte(urlset(3)), URLSet},
		"gzip urlset":    {gz(urlset(3)), URLSet},
		"index":          {[]byte(`<?xml version="1.0"?><!-- c --><sitemapindex><sitemap><loc>x</loc></sitemap>`), Index},
		"cut after root": {[]byte(`<urlset><url><loc>http://s.test/`), URLSet},
		"html":           {[]byte("<!DOCTYPE html><html></html>"), 0},
		"garbage":        {[]byte("\x00\x01not xml"), 0},
		"bad gzip":       {gz(urlset(3))[:5], 0},
	} {
		if got := Sniff(tc.body); got != tc.want {
			t.Errorf("%s: Sniff = %v, want %v", name, got, tc.want)
		}
	}
}
