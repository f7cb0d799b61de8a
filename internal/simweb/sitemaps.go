package simweb

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"net/http"
	"strings"
)

// The paths a host with HostSpec.Sitemaps serves. robots.txt names SitemapNews; /sitemap.xml
// is an index of SitemapPages (gzip) and SitemapBroken. Each lists one page no page links to
// (OrphanNews, OrphanPages, OrphanBroken); SitemapBroken breaks off after its first entry.
const (
	SitemapIndex  = "/sitemap.xml"
	SitemapNews   = "/sitemap-news.xml"
	SitemapPages  = "/sitemap-pages.xml.gz"
	SitemapBroken = "/sitemap-broken.xml"
	OrphanNews    = "/orphan-news"
	OrphanPages   = "/orphan-pages"
	OrphanBroken  = "/orphan-broken"
	// SitemapLastMod is the <lastmod> of every sitemap entry.
	SitemapLastMod = "2024-05-01T10:00:00Z"
)

func urlsetXML(base string, paths ...string) string {
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n" + `<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">` + "\n")
	for _, p := range paths {
		fmt.Fprintf(&b, "<url><loc>%s%s</loc><lastmod>%s</lastmod></url>\n", base, p, SitemapLastMod)
	}
	b.WriteString("</urlset>\n")
	return b.String()
}

// sitemapRobotsLine is the Sitemap line robots.txt carries (absolute, as RFC 9309 wants).
func sitemapRobotsLine(r *http.Request) string {
	return "\nSitemap: http://" + r.Host + SitemapNews + "\n"
}

// serveSitemap answers p if it is one of the sitemap paths and reports whether it did.
func serveSitemap(w http.ResponseWriter, r *http.Request, p string) bool {
	base := "http://" + r.Host
	switch p {
	case SitemapIndex:
		writeBody(w, "application/xml", []byte(`<?xml version="1.0" encoding="UTF-8"?>`+"\n"+
			`<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">`+
			"<sitemap><loc>"+base+SitemapPages+"</loc></sitemap>"+
			"<sitemap><loc>"+base+SitemapBroken+"</loc></sitemap></sitemapindex>\n"))
	case SitemapNews:
		writeBody(w, "text/xml; charset=utf-8", []byte(urlsetXML(base, OrphanNews)))
	case SitemapPages:
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		zw.Write([]byte(urlsetXML(base, OrphanPages)))
		zw.Close()
		writeBody(w, "application/gzip", b.Bytes())
	case SitemapBroken:
		s := urlsetXML(base, OrphanBroken, "/never")
		writeBody(w, "application/xml", []byte(s[:strings.Index(s, "/never")-10]))
	case OrphanNews, OrphanPages, OrphanBroken:
		writeBody(w, "text/html; charset=utf-8", []byte("<!DOCTYPE html><title>orphan</title><p>Only a sitemap links here.</p>"))
	default:
		return false
	}
	return true
}
