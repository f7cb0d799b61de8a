package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/crawl-project/crawl/internal/crawler"
)

// TestSeedFailureShownAndExit1: a seed whose server's certificate is not trusted shows the cause
// (x509) while the crawl runs and names the host with it in the summary; a crawl that fetched
// nothing exits 1; crawl urls lists the failed seed.
func TestSeedFailureShownAndExit1(t *testing.T) {
	s := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("hi")) }))
	defer s.Close()
	seeds := writeFile(t, "seeds.txt", []byte(s.URL+"/\n"))
	dir := t.TempDir()
	var out, errb bytes.Buffer
	code := runCmd([]string{"--quiet", "--seeds", seeds, "--data", dir}, &out, &errb)
	if code != exitRuntime {
		t.Errorf("exit %d, want %d (nothing fetched)\n%s%s", code, exitRuntime, out.String(), errb.String())
	}
	host := strings.TrimPrefix(s.URL, "https://")
	if !strings.Contains(errb.String(), `msg="host failed" host=`+host) || !strings.Contains(errb.String(), "x509") {
		t.Errorf("stderr does not show the host's failure and its cause (x509):\n%s", errb.String())
	}
	if !strings.Contains(out.String(), "every request to "+host+" failed: robots.txt: tls:") || !strings.Contains(out.String(), "x509") {
		t.Errorf("summary does not name the failing host with its cause:\n%s", out.String())
	}
	if !strings.Contains(errb.String(), "nothing was fetched") {
		t.Errorf("stderr does not say nothing was fetched:\n%s", errb.String())
	}
	out.Reset()
	if code := urlsCmd([]string{"--data", dir, "--state", "failed", "--json"}, &out, &errb); code != exitOK {
		t.Fatalf("crawl urls: exit %d\n%s", code, errb.String())
	}
	var l urlLine
	if err := json.Unmarshal(out.Bytes(), &l); err != nil || l.URL != s.URL+"/" || l.Reason != "robots-unreachable" || l.Attempts != 1 {
		t.Errorf("crawl urls --state failed --json: %q (%v)", out.String(), err)
	}
}

// fixableSite serves "/" linking to /a and /private/b; "/" answers 500 while broken is set, and
// robots.txt disallows /private/ while closed is set.
func fixableSite(t *testing.T, broken, closed *atomic.Bool) string {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/robots.txt" && closed.Load():
			w.Write([]byte("User-agent: *\nDisallow: /private/\n"))
		case r.URL.Path == "/robots.txt":
			http.NotFound(w, r)
		case r.URL.Path == "/" && broken.Load():
			http.Error(w, "down", http.StatusInternalServerError)
		default:
			w.Header().Set("Content-Type", "text/html")
			w.Write([]byte(`<a href="/a">a</a> <a href="/private/b">b</a>`))
		}
	}))
	t.Cleanup(s.Close)
	return s.URL
}

// TestRetryFailedAndExcluded: a seed that failed (a 500 with --max-attempts 1) is fetched after
// the server is fixed by crawl run --retry failed, which says what it re-queued; a URL robots.txt
// excluded is fetched by --retry excluded once robots.txt allows it. crawl urls filters by
// state, reason and host; --log-urls records each URL's final state.
func TestRetryFailedAndExcluded(t *testing.T) {
	t.Parallel()
	var broken, closed atomic.Bool
	broken.Store(true)
	closed.Store(true)
	site := fixableSite(t, &broken, &closed)
	seeds := writeFile(t, "seeds.txt", []byte(site+"/\n"))
	dir := t.TempDir()
	log := filepath.Join(t.TempDir(), "urls.jsonl")
	var out, errb bytes.Buffer
	if code := runCmd([]string{"--quiet", "--seeds", seeds, "--data", dir, "--max-attempts", "1", "--log-urls", log}, &out, &errb); code != exitRuntime {
		t.Fatalf("broken seed: exit %d, want %d\n%s%s", code, exitRuntime, out.String(), errb.String())
	}
	broken.Store(false)
	got := runOK(t, "--data", dir, "--retry", "failed", "--log-urls", log)
	if !strings.Contains(got, "re-queued 1 failed URL (status-500 1)") {
		t.Errorf("--retry failed does not say what it re-queued:\n%s", got)
	}
	st := statusJSON(t, dir)
	if st.Fetched != 2 || st.ExcludedBy["robots"] != 1 || st.Failed != 0 {
		t.Fatalf("after --retry failed: fetched %d, failed %d, excluded %v", st.Fetched, st.Failed, st.ExcludedBy)
	}

	host := strings.TrimPrefix(site, "http://")
	hostname := host[:strings.LastIndexByte(host, ':')]
	for _, tc := range []struct {
		args []string
		want []string // URLs listed, sorted (crawl urls lists them in no particular order)
	}{
		{[]string{"--state", "excluded"}, []string{site + "/private/b"}},
		{[]string{"--reason", "robots", "--host", hostname}, []string{site + "/private/b"}},
		{[]string{"--state", "fetched,excluded", "--host", host}, []string{site + "/", site + "/a", site + "/private/b"}},
		{[]string{"--host", hostname + ":1"}, nil},
	} {
		out.Reset()
		if code := urlsCmd(append([]string{"--data", dir, "--json"}, tc.args...), &out, &errb); code != exitOK {
			t.Fatalf("crawl urls %q: exit %d\n%s", tc.args, code, errb.String())
		}
		var urls []string
		for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			var l urlLine
			if line != "" && json.Unmarshal([]byte(line), &l) == nil {
				urls = append(urls, l.URL)
			}
		}
		slices.Sort(urls)
		if strings.Join(urls, " ") != strings.Join(tc.want, " ") {
			t.Errorf("crawl urls %q listed %q, want %q", tc.args, urls, tc.want)
		}
	}

	closed.Store(false)
	got = runOK(t, "--data", dir, "--retry", "excluded", "--log-urls", log)
	if !strings.Contains(got, "re-queued 1 excluded URL (robots 1)") {
		t.Errorf("--retry excluded does not say what it re-queued:\n%s", got)
	}
	if st := statusJSON(t, dir); st.Fetched != 3 || st.Excluded != 0 {
		t.Errorf("after --retry excluded: fetched %d, excluded %v", st.Fetched, st.ExcludedBy)
	}

	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	var states []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var e crawler.URLLogEntry
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("--log-urls line %q: %v", line, err)
		}
		states = append(states, strings.TrimPrefix(e.URL, site)+" "+e.State+" "+e.Reason)
	}
	want := "/ failed status-500|/ fetched |/a fetched |/private/b fetched "
	if strings.Join(states, "|") != want {
		t.Errorf("--log-urls recorded %q, want %q", strings.Join(states, "|"), want)
	}

	if code := runCmd([]string{"--data", dir, "--retry", "everything"}, &out, &errb); code != exitUsage || !strings.Contains(errb.String(), "--retry takes failed, excluded") {
		t.Errorf("--retry everything: exit %d\n%s", code, errb.String())
	}
}
