package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crawl-project/crawl/storage"
)

// storedRecords are settings records byte for byte as earlier versions of crawl stored them,
// each with the settings line `crawl status` printed for it then. HOSTS stands for a
// --hosts-config path, made by the test.
var storedRecords = []struct {
	name, record, line string
}{
	{"defaults",
		`{"settings":{"scope":"host","max_depth":-1,"requisites_scope":"any","max_pages":0,"max_host_pages":0,"user_agent":"crawl/0.1 (+contact: set --user-agent to name yourself)","host_concurrency":8,"timeout":30000000000,"max_body":10485760,"initial_rate":2,"min_rate":0.1,"max_rate":1000,"ignore_crawl_delay":false,"robots_ttl":86400000000000,"max_attempts":5}}`,
		`--scope host --max-depth -1 --max-pages 0 --max-host-pages 0 --user-agent 'crawl/0.1 (+contact: set --user-agent to name yourself)' --host-concurrency 8 --timeout 30s --max-body 10485760 --initial-rate 2 --min-rate 0.1 --max-rate 1000 --ignore-crawl-delay=false --robots-ttl 24h0m0s --max-attempts 5 --requisites=false --requisites-scope any --sitemaps=false`},
	{"before requisites-scope was kept",
		`{"settings":{"scope":"host","max_depth":-1,"max_pages":0,"max_host_pages":0,"user_agent":"crawl/0.1 (+contact: set --user-agent to name yourself)","host_concurrency":8,"timeout":30000000000,"max_body":10485760,"initial_rate":2,"min_rate":0.1,"max_rate":1000,"ignore_crawl_delay":false,"robots_ttl":86400000000000,"max_attempts":5}}`,
		`--scope host --max-depth -1 --max-pages 0 --max-host-pages 0 --user-agent 'crawl/0.1 (+contact: set --user-agent to name yourself)' --host-concurrency 8 --timeout 30s --max-body 10485760 --initial-rate 2 --min-rate 0.1 --max-rate 1000 --ignore-crawl-delay=false --robots-ttl 24h0m0s --max-attempts 5 --requisites=false --requisites-scope any --sitemaps=false`},
	{"every setting",
		`{"settings":{"scope":"domain","max_depth":0,"include":["index|b\\.html"],"exclude":["\\?"],"accept_type":["text/html","text/*"],"deny_ext":["pdf"],"requisites":true,"requisites_scope":"host","sitemaps":true,"max_pages":7,"max_host_pages":9,"user_agent":"OldBot/2.0 (+http://x.test/)","robots_agent":"OldBot","host_concurrency":3,"timeout":12000000000,"max_body":1048576,"initial_rate":4,"min_rate":0.5,"max_rate":40,"ignore_crawl_delay":true,"robots_ttl":7200000000000,"max_attempts":3}}`,
		`--scope domain --max-depth 0 --include 'index|b\.html' --exclude '\?' --accept-type text/html --accept-type 'text/*' --deny-ext pdf --max-pages 7 --max-host-pages 9 --user-agent 'OldBot/2.0 (+http://x.test/)' --robots-agent OldBot --host-concurrency 3 --timeout 12s --max-body 1048576 --initial-rate 4 --min-rate 0.5 --max-rate 40 --ignore-crawl-delay --robots-ttl 2h0m0s --max-attempts 3 --requisites --requisites-scope host --sitemaps`},
	{"depth and hosts file",
		`{"settings":{"scope":"host","max_depth":2,"requisites_scope":"any","max_pages":0,"max_host_pages":0,"user_agent":"crawl/0.1 (+contact: set --user-agent to name yourself)","host_concurrency":8,"timeout":30000000000,"max_body":10485760,"initial_rate":2,"min_rate":0.1,"max_rate":1000,"ignore_crawl_delay":false,"robots_ttl":86400000000000,"max_attempts":5,"hosts_config":"HOSTS"}}`,
		`--scope host --max-depth 2 --max-pages 0 --max-host-pages 0 --user-agent 'crawl/0.1 (+contact: set --user-agent to name yourself)' --host-concurrency 8 --timeout 30s --max-body 10485760 --initial-rate 2 --min-rate 0.1 --max-rate 1000 --ignore-crawl-delay=false --robots-ttl 24h0m0s --max-attempts 5 --requisites=false --requisites-scope any --sitemaps=false --hosts-config HOSTS`},
}

// TestEarlierStoredSettings: a store holding settings as earlier versions stored them resumes
// with them: `crawl status` shows them as it did then, and a run given no flag but a seed
// crawls with them, reporting no setting changed.
func TestEarlierStoredSettings(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte(`<a href="/b.html">b</a>`))
	}))
	t.Cleanup(srv.Close)
	hosts := filepath.Join(t.TempDir(), "hosts.toml")
	if err := os.WriteFile(hosts, []byte("[\"x.test\"]\nmax_rate = 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range storedRecords {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			db, err := storage.Open(dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			err = db.PutMeta("settings", []byte(strings.ReplaceAll(tc.record, "HOSTS", hosts)))
			if cerr := db.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				t.Fatal(err)
			}
			want := "settings: " + strings.ReplaceAll(tc.line, "HOSTS", hosts) + "\n"
			status := func(when string) {
				t.Helper()
				var out, errb bytes.Buffer
				if code := statusCmd([]string{"--data", dir}, &out, &errb); code != exitOK {
					t.Fatalf("crawl status %s: exit %d\n%s", when, code, errb.String())
				}
				if !strings.Contains(out.String(), want) {
					t.Errorf("crawl status %s, want %q:\n%s", when, want, out.String())
				}
			}
			status("before the run")
			var out, errb bytes.Buffer
			code := runCmd([]string{"--quiet", "--allow-private-networks", "--data", dir, srv.URL + "/index.html"}, &out, &errb)
			if code != exitOK || strings.Contains(errb.String(), "as stored") {
				t.Fatalf("crawl run: exit %d, want %d and no setting changed:\n%s%s", code, exitOK, out.String(), errb.String())
			}
			status("after the run")
		})
	}
}
