package export

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/crawl-project/crawl/storage"
)

func TestMirrorPath(t *testing.T) {
	long := strings.Repeat("x", 1000)
	for _, tc := range []struct{ url, want string }{
		{"http://a.example/", "a.example/index.html"},
		{"http://a.example", "a.example/index.html"},
		{"http://a.example/a", "a.example/a"},
		{"http://a.example/a/", "a.example/a/index.html"},
		{"http://a.example/a/b", "a.example/a/b"},
		{"http://A.Example:80/a", "a.example/a"},
		{"https://a.example:443/a", "a.example/a"},
		{"http://a.example:8080/x", "a.example+8080/x"},
		{"http://[::1]:8080/x", "[%3A%3A1]+8080/x"},
		{"http://a.example/a%2Fb", "a.example/a%2Fb"},
		{"http://a.example/..%2F..%2Fetc", "a.example/..%2F..%2Fetc"},
		{"http://a.example/../../etc/passwd", "a.example/%2E%2E/%2E%2E/etc/passwd"},
		{"http://a.example/%2E%2E/x", "a.example/%2E%2E/x"},
		{"http://a.example/./x", "a.example/%2E/x"},
		{`http://a.example/a\b`, "a.example/a%5Cb"},
		{"http://a.example/a%00b", "a.example/a%00b"},
		{"http://a.example/a%0D%0Ab", "a.example/a%0D%0Ab"},
		{"http://a.example/%FF", "a.example/%FF"},
		{"http://a.example/a//b", "a.example/a/%/b"},
		{"http://a.example/a:b*c", "a.example/a%3Ab%2Ac"},
		{"http://a.example/a%3Fb", "a.example/a%3Fb"},
		{"http://a.example/100%25", "a.example/100%25"},
		{"http://a.example/caf%C3%A9", "a.example/café"},
		{"http://a.example/CON", "a.example/%43ON"},
		{"http://a.example/con.txt", "a.example/%63on.txt"},
		{"http://a.example/COM1", "a.example/%43OM1"},
		{"http://a.example/CONSOLE", "a.example/CONSOLE"},
		{"http://a.example/trail.", "a.example/trail%2E"},
		{"http://a.example/trail%20", "a.example/trail%20"},
		{"http://a.example/p.php?id=1", "a.example/p~" + shortHash("?id=1", 10) + ".php"},
		{"http://a.example/?q", "a.example/index~" + shortHash("?q", 10) + ".html"},
		{"http://a.example/a?", "a.example/a~" + shortHash("?", 10)},
		{"http://a.example/" + long, "a.example/" + long[:200-17] + "~" + shortHash(long, 16)},
		{"http://a.example/" + long + ".html", "a.example/" + long[:200-22] + "~" + shortHash(long+".html", 16) + ".html"},
		{"http://a.example/" + strings.Repeat("é", 150), "a.example/" + strings.Repeat("é", 91) + "~" + shortHash(strings.Repeat("é", 150), 16)},
		{"http://a.example/" + strings.Repeat("%01", 100), "a.example/" + strings.Repeat("%01", 61) + "~" + shortHash(strings.Repeat("%01", 100), 16)},
		{"http://a.example/" + strings.Repeat("d123456789/", 100) + "f", "a.example/%long/" + shortHash("http://a.example/"+strings.Repeat("d123456789/", 100)+"f", 32)},
		{"http://a.example/\x00", "%invalid/" + shortHash("http://a.example/\x00", 32)},
	} {
		t.Run(tc.url[:min(len(tc.url), 40)], func(t *testing.T) {
			comps := MirrorPath(tc.url)
			if got := strings.Join(comps, "/"); got != tc.want {
				t.Errorf("MirrorPath(%q)\n got %q\nwant %q", tc.url, got, tc.want)
			}
			checkComponents(t, comps)
		})
	}
}

// checkComponents asserts the promises of MirrorPath about every component.
func checkComponents(t *testing.T, comps []string) {
	t.Helper()
	for _, c := range comps {
		if c == "" || c == "." || c == ".." || len(c) > maxNameLen || !utf8.ValidString(c) ||
			strings.ContainsAny(c, "/\\:*?\"<>|\x00") || strings.ContainsFunc(c, func(r rune) bool { return r < 0x20 || r == 0x7f }) ||
			strings.HasSuffix(c, ".") || strings.HasSuffix(c, " ") || isDeviceName(c) {
			t.Errorf("unsafe component %q in %q", c, comps)
		}
	}
	if rel := filepath.Join(comps...); !filepath.IsLocal(rel) {
		t.Errorf("%q is not local", rel)
	}
}

func FuzzMirrorPath(f *testing.F) {
	f.Add("http://a.example/a/b?c=d")
	f.Add("http://a.example/..%2F..%2F")
	f.Add("http://[::1]:8080/%00/%FF/CON.txt")
	f.Add("http://a.example/" + strings.Repeat("é%2F", 90))
	f.Fuzz(func(t *testing.T, u string) {
		comps := MirrorPath(u)
		if len(comps) < 2 {
			t.Fatalf("MirrorPath(%q) = %q: want host and file", u, comps)
		}
		checkComponents(t, comps)
		if n := len(strings.Join(comps, "/")); n > maxPathLen {
			t.Errorf("MirrorPath(%q): %d bytes", u, n)
		}
	})
}

// TestEncodeNameInjective: distinct segments give distinct names.
func TestEncodeNameInjective(t *testing.T) {
	seen := map[string]string{}
	for _, s := range []string{"", ".", "..", "%", "%25", "%2E", "a.", "a%2E", "a ", "a%20", "a/b", "a%2Fb",
		"CON", "%43ON", "con", "a\\b", "a%5Cb", "\x00", "%00", "\xff", "%FF", "ÿ", "a:b", "a%3Ab"} {
		n := encodeName(s)
		if prev, ok := seen[n]; ok {
			t.Errorf("encodeName(%q) = encodeName(%q) = %q", s, prev, n)
		}
		seen[n] = s
	}
}

func mirrorPages(urls ...string) []*storage.Page {
	pages := make([]*storage.Page, len(urls))
	for i, u := range urls {
		pages[i] = &storage.Page{Seq: uint64(i + 1), URL: u, FinalURL: u, Status: 200,
			FetchedAt: baseTime, Body: fmt.Appendf(nil, "page %d: %s", i, u)}
	}
	return pages
}

// mirrorTree exports pages into a fresh directory and returns its files (slash paths relative to
// the root) with their contents. It fails the test on anything but regular files and directories.
func mirrorTree(t *testing.T, pages []*storage.Page) (root string, files map[string]string) {
	t.Helper()
	return mirrorTreeN(t, pages, len(pages))
}

// mirrorTreeN is mirrorTree for pages of which only wantFiles get a file.
func mirrorTreeN(t *testing.T, pages []*storage.Page, wantFiles int) (root string, files map[string]string) {
	t.Helper()
	parent := t.TempDir()
	root = filepath.Join(parent, "mirror")
	w, err := NewMirror(root, sliceSource(pages), nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := Run(context.Background(), sliceSource(pages), w, nil)
	if err != nil {
		t.Fatal(err)
	}
	files = map[string]string{}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s: not a regular file", p)
		}
		rel, err := filepath.Rel(root, p)
		if err != nil || !filepath.IsLocal(rel) {
			return fmt.Errorf("%s escapes %s", p, root)
		}
		b, err := os.ReadFile(p)
		files[filepath.ToSlash(rel)] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// Nothing was written next to the root.
	if ents, _ := os.ReadDir(parent); len(ents) != 1 {
		t.Errorf("%d entries beside the mirror root, want none", len(ents)-1)
	}
	if st.Pages != int64(wantFiles) || st.Files != len(files) || st.Pages+st.Omitted != int64(len(pages)) {
		t.Errorf("stats %+v, %d files on disk, %d pages", st, len(files), len(pages))
	}
	return root, files
}

func TestMirrorLayout(t *testing.T) {
	h := func(u string) string { return shortHash(u, 10) }
	for _, tc := range []struct {
		name string
		urls []string
		want []string // file of each page, in order
	}{
		{"file then dir", []string{"http://x/a", "http://x/a/b"}, []string{"x/a/index.html", "x/a/b"}},
		{"dir then file", []string{"http://x/a/b", "http://x/a"}, []string{"x/a/b", "x/a/index.html"}},
		{"file, slash, child", []string{"http://x/a", "http://x/a/", "http://x/a/b"},
			[]string{"x/a/index.html", "x/a/index~" + h("http://x/a/") + ".html", "x/a/b"}},
		{"slash, file", []string{"http://x/a/", "http://x/a"}, []string{"x/a/index.html", "x/a~" + h("http://x/a")}},
		{"deep demotion", []string{"http://x/a", "http://x/a/b", "http://x/a/b/c"},
			[]string{"x/a/index.html", "x/a/b/index.html", "x/a/b/c"}},
		{"http and https", []string{"http://x/p", "https://x/p"}, []string{"x/p", "x/p~" + h("https://x/p")}},
		{"case differs", []string{"http://x/P", "http://x/p"}, []string{"x/P", "x/p~" + h("http://x/p")}},
		{"two spellings of one name", []string{"http://x/caf%C3%A9", "http://x/café"},
			[]string{"x/café", "x/café~" + h("http://x/café")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pages := mirrorPages(tc.urls...)
			_, files := mirrorTree(t, pages)
			for i, p := range pages {
				if got, ok := files[tc.want[i]]; !ok || got != string(p.Body) {
					t.Errorf("page %s: want it in %s; tree: %q", p.URL, tc.want[i], files)
				}
			}
			if len(files) != len(pages) {
				t.Errorf("%d files for %d pages: %q", len(files), len(pages), files)
			}
		})
	}
}

// A directory URL and its index.html are one file, as wget writes them: the first fetched
// is kept, and links to either lead to it.
func TestMirrorDirectoryAndIndexAreOneFile(t *testing.T) {
	for _, urls := range [][]string{
		{"http://x/", "http://x/index.html", "http://x/d/index.html", "http://x/d/"},
		{"http://x/index.html", "http://x/"},
	} {
		pages := mirrorPages(urls...)
		for _, p := range pages {
			p.Header = http.Header{"Content-Type": {"text/html"}}
			p.ContentType = "text/html"
		}
		want := map[string]string{"x/index.html": string(pages[0].Body)}
		if len(pages) > 2 {
			want["x/d/index.html"] = string(pages[2].Body)
		}
		_, files := mirrorTreeN(t, pages, len(want))
		if !maps.Equal(files, want) {
			t.Errorf("pages %q: files %q, want %q", urls, files, want)
		}
	}
}

func TestMirrorHostileURLs(t *testing.T) {
	f, err := os.Open(filepath.Join("..", "..", "testdata", "export", "hostile_urls.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var urls []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := sc.Text(); l != "" && !strings.HasPrefix(l, "#") {
			urls = append(urls, l)
		}
	}
	long := strings.Repeat("n", 1000)
	urls = append(urls,
		"http://h.example/"+long, "http://h.example/"+long+"/", "http://h.example/"+long+"/x",
		"http://h.example/"+long+"?q", "http://h.example/"+strings.Repeat("%2F", 400),
		"http://h.example/"+strings.Repeat("s/", 600), "http://h.example/bad\x00url", "http://h.example/bad\x01url",
		"http://h.example/a%2F..%2F..%2F..%2Fescape", "http://h.example/%2E%2E%2F%2E%2E%2Fescape")
	pages := mirrorPages(urls...)
	root, files := mirrorTree(t, pages)
	if len(files) != len(pages) {
		t.Fatalf("%d files for %d pages", len(files), len(pages))
	}
	byBody := map[string]string{}
	for name, body := range files {
		byBody[body] = name
		for _, c := range strings.Split(name, "/") {
			if len(c) > maxNameLen {
				t.Errorf("%s: component of %d bytes", name, len(c))
			}
		}
	}
	for _, p := range pages {
		if _, ok := byBody[string(p.Body)]; !ok {
			t.Errorf("page %q has no file (overwritten?)", p.URL)
		}
	}
	// Re-exporting into the same, now non-empty, directory is refused.
	if _, err := NewMirror(root, sliceSource(nil), nil); !errors.Is(err, ErrOutputExists) {
		t.Errorf("NewMirror on a non-empty dir: %v, want ErrOutputExists", err)
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range files {
			if !yield(n) {
				return
			}
		}
	})
	if testing.Verbose() {
		for _, n := range names {
			t.Logf("%s", n[:min(len(n), 120)])
		}
	}
	_ = path.Join
}
