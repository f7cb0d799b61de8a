package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestRedisPasswordHidden: a --redis URL that cannot be used is named in the error without its
// password, by crawl status and crawl run.
func TestRedisPasswordHidden(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"redis://user:hunter2@127.0.0.1:1/x", "redis://:hunter2@127.0.0.1:99999999/0", "rediss://:hunter2@[::1/0"} {
		var out, errb bytes.Buffer
		statusCmd([]string{"--redis", u}, &out, &errb)
		runCmd([]string{"--data", t.TempDir(), "--redis", u, "http://127.0.0.1:1/"}, &out, &errb)
		if all := out.String() + errb.String(); strings.Contains(all, "hunter2") || strings.HasSuffix(u, "/x") && !strings.Contains(all, ":…@") {
			t.Errorf("--redis %q: the password shows, or the URL is not named:\n%s", u, all)
		}
	}
}

// TestPrivateSitemapRecorded: a robots.txt Sitemap line naming a private address (cloud
// metadata, a private network) is not fetched, and the URL is recorded as excluded, like every
// URL the crawl meets.
func TestPrivateSitemapRecorded(t *testing.T) {
	t.Parallel()
	private := []string{"http://169.254.169.254/latest/meta-data/sitemap.xml", "http://10.0.0.1/sitemap.xml", "http://[::a00:1]/sitemap.xml"}
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			w.Write([]byte("User-agent: *\nAllow: /\nSitemap: " + strings.Join(private, "\nSitemap: ") + "\n"))
			return
		}
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("<p>home</p>"))
	}))
	defer site.Close()
	dir := t.TempDir()
	for _, scope := range []string{"host", "domain"} {
		var out, errb bytes.Buffer
		if code := runCmd([]string{"--quiet", "--data", dir, "--sitemaps", "--scope", scope, site.URL + "/"}, &out, &errb); code != exitOK {
			t.Fatalf("exit %d\n%s%s", code, out.String(), errb.String())
		}
		for _, u := range private {
			if st := urlState(t, dir, u); st.State != "excluded" {
				t.Errorf("%s: %s %s; want excluded", u, st.State, st.Reason)
			}
		}
		dir = t.TempDir()
	}
}
