package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/crawl-project/crawl/internal/simweb"
)

// TestSitemaps: with --sitemaps, pages listed only in a sitemap (named in robots.txt, or in
// the /sitemap.xml index, gzip-compressed) are found; a broken sitemap is read up to the break
// and the rest is recorded as excluded with a reason naming it; without the flag none are.
func TestSitemaps(t *testing.T) {
	web, err := simweb.Start([]simweb.HostSpec{{Name: "a", Pages: 5, Sitemaps: true}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	fetched := func(dir string) string {
		code, out, stderr := runExport(t, "--data", dir, "--format", "jsonl", "--out", "-", "--no-body")
		if code != exitOK {
			t.Fatalf("export: %s", stderr)
		}
		return out
	}

	plain := fetched(crawlSite(t, web))
	if strings.Contains(plain, "orphan") || strings.Contains(plain, "sitemap") {
		t.Errorf("without --sitemaps, sitemaps were read")
	}

	dir := crawlSite(t, web, "--sitemaps")
	got := fetched(dir)
	for _, p := range []string{simweb.OrphanNews, simweb.OrphanPages, simweb.OrphanBroken,
		simweb.SitemapIndex, simweb.SitemapNews, simweb.SitemapPages, simweb.SitemapBroken} {
		if !strings.Contains(got, `"url":"`+web.URL("a")+strings.TrimPrefix(p, "/")+`"`) {
			t.Errorf("%s was not fetched", p)
		}
	}
	if strings.Contains(got, "/never") {
		t.Error("an entry past the break of a broken sitemap was fetched")
	}
	st := statusJSON(t, dir)
	if st.ExcludedBy["sitemap"] != 1 {
		t.Errorf("excluded %v, want one \"sitemap\" exclusion for the broken file", st.ExcludedBy)
	}
	var out, errb bytes.Buffer
	if code := dispatch([]string{"urls", "--data", dir, "--state", "excluded"}, &out, &errb); code != exitOK ||
		!strings.Contains(out.String(), web.URL("a")+"sitemap-broken.xml (rest of the sitemap)") {
		t.Errorf("crawl urls does not name the broken sitemap (exit %d):\n%s%s", code, out.String(), errb.String())
	}
}
