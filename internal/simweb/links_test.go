package simweb

import (
	"bytes"
	"io"
	"testing"
)

// TestLinksPerPage checks that HostSpec.Links sets how many links an ordinary page carries,
// that a page's links are the same at every request, and that Expected does not depend on them.
func TestLinksPerPage(t *testing.T) {
	for _, links := range []int{40, 150} {
		w, c := startWeb(t, []HostSpec{{Name: "a", Pages: 500, Links: links}}, &Options{Seed: 7})
		get := func(path string) []byte {
			resp, err := c.Get(w.Seeds()[0] + path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		for _, p := range []string{"", "p1", "p77", "p499"} {
			body := get(p)
			if n := bytes.Count(body, []byte("<a href=")); n != links {
				t.Errorf("Links %d: /%s has %d links", links, p, n)
			}
			if again := get(p); !bytes.Equal(body, again) {
				t.Errorf("Links %d: /%s differs between two requests", links, p)
			}
		}
		if n := len(w.Expected()["a"]); n != 500 {
			t.Errorf("Links %d: Expected has %d URLs, want 500", links, n)
		}
	}
}
