package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/crawl-project/crawl/internal/termsafe"
	"github.com/crawl-project/crawl/storage"
)

// TestExportDeepHTMLSaysSo: crawl export --field and --text on a page nested 600 elements deep
// (past the HTML parser's 512) give its title, text and fields, and say per page that it was
// read flattened: the JSON line's "nesting_flattened_at" and the summary naming the URL,
// escaped for the terminal; CSV says it in the summary.
func TestExportDeepHTMLSaysSo(t *testing.T) {
	dir := t.TempDir()
	db, err := storage.Open(dir, &storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	const deepURL = "http://a.example/deep\x1b[31m" // a byte that must not reach a terminal raw
	body := "<title>T</title><h1>top</h1>" + strings.Repeat("<div>", 600) + "<p>bottom</p>" + strings.Repeat("</div>", 600)
	err = db.Bolt().Update(func(tx *bbolt.Tx) error {
		for _, u := range []string{"http://a.example/", deepURL} {
			b := "<title>T</title><h1>top</h1><p>bottom</p>"
			if u == deepURL {
				b = body
			}
			if _, err := storage.PutPage(tx, &storage.Page{URL: u, FinalURL: u, Status: 200, ContentType: "text/html",
				Header: http.Header{"Content-Type": {"text/html"}}, FetchedAt: exportT0.Add(time.Minute), Body: []byte(b)}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()

	code, stdout, stderr := runExport(t, "--data", dir, "--format", "jsonl", "--out", "-", "--no-body", "--text", "--field", "h1=h1")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 2 || strings.Contains(lines[0], "nesting_flattened_at") ||
		!strings.Contains(lines[1], `"text":"top bottom","fields":{"h1":"top"},"nesting_flattened_at":256`) {
		t.Errorf("lines:\n%s", stdout)
	}
	if !strings.Contains(stderr, "1 HTML page nested deeper than the HTML parser's 512 elements") || !strings.Contains(stderr, termsafe.Escape(deepURL)) {
		t.Errorf("the summary does not name the deep page: %s", stderr)
	}
	if strings.ContainsRune(stderr, 0x1b) {
		t.Errorf("an escape byte reached the terminal: %q", stderr)
	}

	code, stdout, stderr = runExport(t, "--data", dir, "--format", "csv", "--out", "-", "--field", "h1=h1")
	if code != exitOK || !strings.Contains(stdout, deepURL+",top") || !strings.Contains(stderr, "1 HTML page nested deeper") {
		t.Errorf("csv: exit %d\n%s\n%s", code, stdout, stderr)
	}
}
