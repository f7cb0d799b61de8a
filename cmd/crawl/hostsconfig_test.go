package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// TestHostsConfigStoredAndChecked: --hosts-config is stored with the settings and in force on
// a resume that does not name it; a resume whose stored file is gone says so; a host in it
// that is outside the crawl's scope is warned about.
func TestHostsConfigStoredAndChecked(t *testing.T) {
	t.Parallel()
	var withHeader, without atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		if r.Header.Get("X-From-Config") == "yes" {
			withHeader.Add(1)
		} else {
			without.Add(1)
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<a href="%sx">next</a>`, r.URL.Path) // an endless chain: /, /x, /xx …
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	conf := filepath.Join(t.TempDir(), "hosts.toml")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf("[%q]\nheaders = { \"X-From-Config\" = \"yes\" }\n\n[\"elsewhere.example\"]\nmax_rate = 1\n", host)), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	code, _, errOut := crawlCmd(t, "", "run", "--data", dir, "--quiet", "--max-pages", "1", "--hosts-config", conf, srv.URL+"/")
	if code != exitOK {
		t.Fatalf("first run: exit %d\n%s", code, errOut)
	}
	if !strings.Contains(errOut, "host=elsewhere.example") || strings.Contains(errOut, "outside the crawl's scope; its settings apply to no page of the crawl\" host="+host) {
		t.Errorf("want a warning for elsewhere.example, outside the scope, and none for %s:\n%s", host, errOut)
	}
	code, out, errOut := crawlCmd(t, "", "run", "--data", dir, "--quiet", "--max-pages", "3")
	if code != exitOK || without.Load() != 0 || withHeader.Load() != 3 {
		t.Errorf("resume without --hosts-config: exit %d, %d requests with the configured header, %d without; want all 3 with it\n%s%s",
			code, withHeader.Load(), without.Load(), out, errOut)
	}
	if _, st, _ := crawlCmd(t, "", "status", "--data", dir); !strings.Contains(st, "--hosts-config "+conf) {
		t.Errorf("crawl status does not show the stored --hosts-config:\n%s", st)
	}
	os.Remove(conf)
	code, _, errOut = crawlCmd(t, "", "run", "--data", dir, "--quiet", "--max-pages", "4")
	if code != exitUsage || !strings.Contains(errOut, "stored with the settings") {
		t.Errorf("resume whose stored --hosts-config is gone: exit %d, want %d and a message saying it was stored:\n%s", code, exitUsage, errOut)
	}
	if code, _, errOut = crawlCmd(t, "", "run", "--data", dir, "--quiet", "--max-pages", "4", "--hosts-config", ""); code != exitOK || without.Load() != 1 {
		t.Errorf("resume with --hosts-config '': exit %d, %d requests without the header; want 0 and 1\n%s", code, without.Load(), errOut)
	}
}
