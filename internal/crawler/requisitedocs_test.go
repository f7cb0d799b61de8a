package crawler

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// docChain serves /doc/N.html, an HTML document that embeds /doc/N+1.html as an <object>,
// loads the script /js/N.js and links to /doc-link/N.
func docChain(_ <-chan struct{}, w http.ResponseWriter, r *http.Request) {
	n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/doc/"), ".html"))
	if err != nil {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/html")
	fmt.Fprintf(w, `<html><script src="/js/%d.js"></script><object data="/doc/%d.html"></object><a href="/doc-link/%d">on</a></html>`,
		n, n+1, n)
}

// docChainWant is what the store must say of an endless chain of embedded documents: the
// documents up to maxRequisiteHops hops from the page fetched and the scripts they load, the
// next of each excluded as limit.
func docChainWant(more ...expect) []expect {
	want := append([]expect{}, more...)
	for n := range maxRequisiteHops {
		want = append(want, expect{url: fmt.Sprintf("/doc/%d.html", n), state: "fetched", status: 200})
	}
	for n := range maxRequisiteHops - 1 {
		want = append(want, expect{url: fmt.Sprintf("/js/%d.js", n), state: "fetched", status: 200})
	}
	return append(want,
		expect{url: fmt.Sprintf("/doc/%d.html", maxRequisiteHops), state: "excluded", reason: "limit"},
		expect{url: fmt.Sprintf("/js/%d.js", maxRequisiteHops-1), state: "excluded", reason: "limit"})
}

// checkDocChain: the chain stops at the hop bound, and no document's link is followed.
func checkDocChain(t *testing.T, r *hostileResult) {
	if n := r.site.hitPrefix("/doc/"); n != maxRequisiteHops {
		t.Errorf("%d documents of the chain fetched, want %d", n, maxRequisiteHops)
	}
	if n := r.site.hitPrefix("/js/"); n != maxRequisiteHops-1 {
		t.Errorf("%d scripts of the chain's documents fetched, want %d", n, maxRequisiteHops-1)
	}
	if n := r.site.hitPrefix("/doc-link/"); n != 0 {
		t.Errorf("%d links of documents fetched as requisites followed, want none", n)
	}
}

// docFan serves /docfan/X.html, which embeds 200 new documents /docfan/X-i.html.
func docFan(_ <-chan struct{}, w http.ResponseWriter, r *http.Request) {
	id := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/docfan/"), ".html")
	w.Header().Set("Content-Type", "text/html")
	for i := range 200 {
		fmt.Fprintf(w, "<embed src=\"/docfan/%s-%d.html\">\n", id, i)
	}
}
