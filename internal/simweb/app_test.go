package simweb

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// appGet asks the App web w for path on host, through its one listener.
func appGet(t *testing.T, w *Web, host, path string) (int, string) {
	t.Helper()
	_, port, _ := net.SplitHostPort(w.Addr())
	req, _ := http.NewRequest("GET", "http://"+w.Addr()+path, nil)
	req.Host = host + ":" + port
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestApp(t *testing.T) {
	app := NewApp(AppOptions{Pages: 10, Outside: "http://outside.test:1/steal"})
	w, err := Start(app.Specs, &Options{VirtualHosts: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()

	status, shell := appGet(t, w, AppSite, AppPagePath(2))
	if status != 200 || !strings.Contains(shell, "Loading…") || strings.Contains(shell, "<a ") {
		t.Errorf("shell page: %d %q: want 200, Loading… and no link", status, shell)
	}
	status, body := appGet(t, w, AppAPI, "/content/2")
	var d struct {
		Title, Text string
		Links       []string
	}
	if err := json.Unmarshal([]byte(body), &d); status != 200 || err != nil {
		t.Fatalf("content: %d %q %v", status, body, err)
	}
	if d.Title != AppTitle(2) || d.Text != AppText(2) || len(d.Links) != 1 || !strings.HasSuffix(d.Links[0], AppPagePath(9)) {
		t.Errorf("content of page 2 = %+v: want its title, text and the link to page 9", d)
	}
	_, script := appGet(t, w, AppCDN, "/app.js")
	if !strings.Contains(script, `fetch("http://outside.test:1/steal")`) || !strings.Contains(script, "/private/track") {
		t.Errorf("app.js does not call the outside URL and the disallowed path:\n%s", script)
	}
	_, robots := appGet(t, w, AppAPI, "/robots.txt")
	if !strings.Contains(robots, "Disallow: /private/") {
		t.Errorf("API robots.txt = %q", robots)
	}
	appGet(t, w, AppCDN, "/app.js")
	if got := app.CDNFetches()["/app.js"]; got != 2 {
		t.Errorf("CDNFetches[/app.js] = %d, want 2", got)
	}
}
