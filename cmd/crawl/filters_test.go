package main

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// TestAcceptTypeAndDenyExt: with --accept-type text/html a page of another type is excluded
// as type after its headers, its body unread; with --deny-ext pdf a .pdf link is excluded as
// filter and never requested. A resume that widens --accept-type fetches the page it excluded.
func TestAcceptTypeAndDenyExt(t *testing.T) {
	const bigSize = 64 << 20
	var bigSent, pdfRequests atomic.Int64
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/":
			w.Header().Set("Content-Type", "text/html")
			w.Write([]byte(`<a href="/big.bin">big</a> <a href="/Doc.PDF">doc</a> <a href="/page">page</a>`))
		case "/page":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Write([]byte("<title>page</title>"))
		case "/big.bin":
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Header().Set("Content-Length", "67108864")
			chunk := make([]byte, 32<<10)
			for sent := 0; sent < bigSize; sent += len(chunk) {
				if _, err := w.Write(chunk); err != nil {
					return
				}
				bigSent.Add(int64(len(chunk)))
			}
		case "/Doc.PDF":
			pdfRequests.Add(1)
			w.Header().Set("Content-Type", "application/pdf")
			w.Write([]byte("%PDF-1.4"))
		default:
			http.NotFound(w, r)
		}
	}))
	defer site.Close()

	dir := filepath.Join(t.TempDir(), "data")
	code, out, errOut := crawlCmd(t, "", "run", site.URL+"/", "--data", dir, "--quiet", "--max-body", "128M",
		"--accept-type", "text/html", "--deny-ext", ".pdf,iso")
	if code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	if st := urlState(t, dir, site.URL+"/big.bin"); st.State != "excluded" || st.Reason != "type" || !strings.Contains(st.Detail, "application/octet-stream") {
		t.Errorf("big.bin: %+v, want excluded type naming application/octet-stream", st)
	}
	if n := bigSent.Load(); n >= bigSize {
		t.Errorf("the server sent all %d bytes of big.bin: the body was read", n)
	}
	if st := urlState(t, dir, site.URL+"/Doc.PDF"); st.State != "excluded" || st.Reason != "filter" || pdfRequests.Load() != 0 {
		t.Errorf("Doc.PDF: %+v after %d requests, want excluded filter and never requested", st, pdfRequests.Load())
	}
	if st := urlState(t, dir, site.URL+"/page"); st.State != "fetched" {
		t.Errorf("page: %+v, want fetched", st)
	}
	if st := statusJSON(t, dir); st.Settings == nil || strings.Join(st.Settings.AcceptType, ",") != "text/html" || strings.Join(st.Settings.DenyExt, ",") != "pdf,iso" {
		t.Errorf("stored settings %+v, want accept-type text/html and deny-ext pdf,iso", st.Settings)
	}

	code, out, errOut = crawlCmd(t, "", "run", "--data", dir, "--quiet", "--max-body", "1M", "--accept-type", "text/*,application/octet-stream")
	if code != exitOK || !strings.Contains(errOut, "re-queued 1 excluded URL (type 1)") {
		t.Fatalf("widened --accept-type: exit %d\n%s%s", code, out, errOut)
	}
	if st := urlState(t, dir, site.URL+"/big.bin"); st.State != "fetched" {
		t.Errorf("big.bin after widening --accept-type: %+v, want fetched", st)
	}
	if st := urlState(t, dir, site.URL+"/Doc.PDF"); st.State != "excluded" || pdfRequests.Load() != 0 {
		t.Errorf("Doc.PDF after the resume: %+v, %d requests; --deny-ext is kept", st, pdfRequests.Load())
	}

	code, _, errOut = crawlCmd(t, "", "run", site.URL+"/", "--data", t.TempDir(), "--accept-type", "html")
	if code != exitUsage || !strings.Contains(errOut, `--accept-type takes media types such as text/html or text/*, not "html"`) {
		t.Errorf("--accept-type html: exit %d, %s", code, errOut)
	}
}
