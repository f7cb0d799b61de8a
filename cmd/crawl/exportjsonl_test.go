package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestExportJSONLPageFields crawls a small site for real and checks the fields export derives
// per page: title (also with --no-body), charset, outlinks, depth, parent, referrer and --text.
func TestExportJSONLPageFields(t *testing.T) {
	mux := http.NewServeMux()
	page := func(path, ct, body string) {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != path {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Content-Type", ct)
			w.Write([]byte(body))
		})
	}
	page("/", "text/html; charset=utf-8", `<title> Home  page </title><h1>Welcome</h1><a href=/a>A</a> <a href=/a>again</a> <a href=/old>old</a>`)
	page("/a", "text/html", "<meta charset=windows-1252><title>caf\xe9</title><script>x()</script><p>Hello <b>w</b>orld</p><a href=/b>b</a>")
	page("/new", "text/html", `<title>New</title><p>moved here</p>`)
	page("/b", "text/plain; charset=ISO-8859-1", "gr\xf6\xdfe")
	mux.Handle("/old", http.RedirectHandler("/new", http.StatusMovedPermanently))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	root := srv.URL + "/"

	var errb strings.Builder
	dir := t.TempDir() + "/data"
	if code := runCmd([]string{"--seeds", writeSeeds(t, []string{root}), "--data", dir, "--quiet", "--initial-rate", "1000"}, &errb, &errb); code != exitOK {
		t.Fatalf("crawl run: exit %d\n%s", code, errb.String())
	}
	type want struct {
		title, charset, text string
		outlinks             float64 // -1: absent
		depth                float64
		parent, referrer     string
	}
	wants := map[string]want{
		root:                    {"Home page", "utf-8", "Welcome A again old", 2, 0, "", ""},
		srv.URL + "/a":          {"café", "windows-1252", "Hello world b", 1, 1, root, root},
		srv.URL + "/old":        {"", "utf-8", "Moved Permanently.", -1, 1, root, root}, // net/http's HTML redirect body; no links counted
		srv.URL + "/new":        {"New", "utf-8", "moved here", 0, 1, srv.URL + "/old", root},
		srv.URL + "/b":          {"", "iso-8859-1", "", -1, 2, srv.URL + "/a", srv.URL + "/a"},
		srv.URL + "/robots.txt": {},
	}
	for _, args := range [][]string{{"--no-body", "--text"}, {}} {
		code, stdout, stderr := runExport(t, append([]string{"--data", dir, "--format", "jsonl", "--out", "-"}, args...)...)
		if code != exitOK {
			t.Fatalf("export %q: exit %d: %s", args, code, stderr)
		}
		seen := 0
		for line := range strings.Lines(stdout) {
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatal(err)
			}
			u := m["url"].(string)
			w, ok := wants[u]
			if !ok {
				t.Errorf("unexpected page %s", u)
				continue
			}
			if strings.HasSuffix(u, "/robots.txt") {
				continue
			}
			seen++
			str := func(k string) string { s, _ := m[k].(string); return s }
			if str("title") != w.title || str("charset") != w.charset || m["depth"] != w.depth ||
				m["parent"] != w.parent || m["referrer"] != w.referrer {
				t.Errorf("%q %s: title %#v charset %#v depth %#v parent %#v referrer %#v, want %+v",
					args, u, m["title"], m["charset"], m["depth"], m["parent"], m["referrer"], w)
			}
			if n, ok := m["outlinks"].(float64); !ok && w.outlinks >= 0 || ok && n != w.outlinks {
				t.Errorf("%q %s: outlinks %#v, want %v", args, u, m["outlinks"], w.outlinks)
			}
			if len(args) > 0 {
				if str("text") != w.text || m["body"] != nil {
					t.Errorf("%q %s: text %#v body %#v, want text %q and no body", args, u, m["text"], m["body"], w.text)
				}
			} else if _, ok := m["text"]; ok || m["body"] == nil {
				t.Errorf("%q %s: text %#v body %#v, want a body and no text", args, u, m["text"], m["body"])
			}
		}
		if seen != 5 {
			t.Errorf("export %q: %d pages, want 5:\n%s", args, seen, stdout)
		}
	}
	if code, _, stderr := runExport(t, "--data", dir, "--format", "warc", "--out", t.TempDir()+"/", "--text"); code != exitUsage || !strings.Contains(stderr, "--text applies to --format jsonl only") {
		t.Errorf("--text with warc: exit %d, %q", code, stderr)
	}
}
