package simweb

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// getWith sends a GET with header h (none if nil).
func getWith(t *testing.T, c *http.Client, url string, h http.Header) reply {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if h != nil {
		req.Header = h
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: body: %v", url, err)
	}
	return reply{resp.StatusCode, resp.Header, string(b)}
}

// conditions returns the request headers that revalidate an answer with header h.
func conditions(h http.Header) http.Header {
	c := http.Header{}
	if v := h.Get("ETag"); v != "" {
		c.Set("If-None-Match", v)
	}
	if v := h.Get("Last-Modified"); v != "" {
		c.Set("If-Modified-Since", v)
	}
	return c
}

func TestRevisions(t *testing.T) {
	w, c := startWeb(t, []HostSpec{{Name: "a", Pages: 8, Revisions: true}}, nil)
	paths := []string{"/", "/p1", "/p2", "/p3"} // one page of each Validators style
	first := map[string]reply{}
	for i, p := range paths {
		r := get(t, c, strings.TrimSuffix(w.URL("a"), "/")+p)
		if r.status != http.StatusOK {
			t.Fatalf("%s: status %d", p, r.status)
		}
		v := ValidatorsOf(i)
		hasETag, hasLM := r.header.Get("ETag") != "", r.header.Get("Last-Modified") != ""
		if hasETag != (v == ETagAndLastModified || v == ETagOnly) || hasLM != (v == ETagAndLastModified || v == LastModifiedOnly) {
			t.Errorf("%s (style %d): ETag %q Last-Modified %q", p, v, r.header.Get("ETag"), r.header.Get("Last-Modified"))
		}
		first[p] = r
	}
	// Unchanged: every page with a validator answers 304, the one without answers 200.
	for i, p := range paths {
		r := getWith(t, c, strings.TrimSuffix(w.URL("a"), "/")+p, conditions(first[p].header))
		want := http.StatusNotModified
		if ValidatorsOf(i) == NoValidators {
			want = http.StatusOK
		}
		if r.status != want {
			t.Errorf("unchanged %s: status %d, want %d", p, r.status, want)
		}
	}
	if err := w.Change("a", "/", "/p1", "/p2", "/p3"); err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		r := getWith(t, c, strings.TrimSuffix(w.URL("a"), "/")+p, conditions(first[p].header))
		if r.status != http.StatusOK || r.body == first[p].body || !strings.Contains(r.body, "<p>revision 1</p>") {
			t.Errorf("changed %s: status %d, body changed %v", p, r.status, r.body != first[p].body)
		}
		if e := r.header.Get("ETag"); e != "" && e == first[p].header.Get("ETag") {
			t.Errorf("changed %s kept ETag %s", p, e)
		}
	}
	// A stale ETag is not rescued by a matching If-Modified-Since: If-None-Match decides.
	h := conditions(first["/"].header)
	h.Set("If-Modified-Since", "Fri, 01 Jan 2100 00:00:00 GMT")
	if r := getWith(t, c, w.URL("a"), h); r.status != http.StatusOK {
		t.Errorf("stale ETag, late If-Modified-Since: status %d, want 200", r.status)
	}
	st := w.Stats()["a"]
	if st.Conditional != 7 || st.NotModified != 3 {
		t.Errorf("Conditional %d NotModified %d, want 7 and 3 (the page without validators sends none)", st.Conditional, st.NotModified)
	}
	if err := w.Change("a", "/nope"); err == nil {
		t.Error("Change of a path that is no page: no error")
	}
	w.Reset()
	if r := getWith(t, c, w.URL("a")+"p1", conditions(first["/p1"].header)); r.status != http.StatusOK {
		t.Errorf("after Reset, the old revision's ETag: status %d, want 200 (revisions survive Reset)", r.status)
	}
}
