package mirrorcheck

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestCheck(t *testing.T) {
	root := t.TempDir()
	write := func(rel, body string) {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("h/index.html", `<a href="a/b.html#x">ok</a><img src="x%253F.png" srcset="x%253F.png 1x, gone.png 2x">`+
		`<a href="../../etc/passwd">out</a><a href="http://h/abs">abs</a><a href="https://other/">o</a><a href="#f">f</a>`)
	write("h/a/b.html", `<link href="../index.html"><style>b{background:url(nostyle.png)}</style><p style="background:url('../x%253F.png')">`)
	write("h/x%3F.png", "png")
	write("h/s.css", `@import "print.css"; b{background:url(x%253F.png)} i{background:url(data:image/png;base64,AA)}`)
	rep, err := Check(root)
	if err != nil {
		t.Fatal(err)
	}
	wantBroken := []string{"h/a/b.html: nostyle.png", "h/index.html: ../../etc/passwd (leaves the mirror)", "h/index.html: gone.png",
		"h/s.css: print.css"}
	slices.Sort(rep.Broken)
	if rep.Files != 4 || rep.Links != 10 || !slices.Equal(rep.Broken, wantBroken) ||
		!slices.Equal(rep.Absolute, []string{"h/index.html: http://h/abs"}) {
		t.Errorf("report %+v", rep)
	}
}
