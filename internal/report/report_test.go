package report

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/crawl-project/crawl/internal/crawler"
	"github.com/crawl-project/crawl/internal/simweb"
	"github.com/crawl-project/crawl/storage"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// synthetic is a report's data for two hosts over 20 s: host a with a sawtooth, two 429s, a
// Retry-After pause and a retry; host b (named by a label that tries to inject markup) quiet.
func synthetic() *Data {
	var a, b, wide []storage.Sample
	wide = append(wide, storage.Sample{At: t0})
	rate := 2.0
	for i := 1; i <= 20; i++ {
		at := t0.Add(time.Duration(i) * time.Second)
		s := storage.Sample{At: at, Span: time.Second, Rate: rate, Limit: rate, Accepted: min(rate, 8), Window: 2,
			Requests: int(rate), Pages: int(rate), P50: 3 * time.Millisecond, P95: 9 * time.Millisecond}
		rate++
		if i == 7 || i == 15 {
			s.OverLimit, s.Retries, s.PausedUntil = 1, 1, at.Add(2*time.Second)
			rate /= 2
		}
		a = append(a, s)
		b = append(b, storage.Sample{At: at, Span: time.Second, Rate: 1, Limit: 0.5, Accepted: 0.5, Requests: 1, Pages: 1,
			P50: time.Millisecond, P95: 2 * time.Millisecond})
		wide = append(wide, storage.Sample{At: at, Span: time.Second, Queued: float64(40 - 2*i), InFlight: 1.5, Hosts: 2,
			Requests: s.Requests + 1, Pages: s.Pages + 1, OverLimit: s.OverLimit, Retries: s.Retries})
	}
	return &Data{
		Dir: "/data/x",
		Status: crawler.Status{Fetched: 180, Failed: 1, Hosts: []crawler.HostStatus{
			{Host: "a.example", Pages: 160, Rate: 6, Window: 2},
			{Host: "b.example:8080", Pages: 20, Failed: 1, Rate: 1, LastError: "timeout: <oops>"},
			{Host: "c.example", Pages: 0}, // known, never sampled
		}},
		Series: map[string][]storage.Sample{"a.example": a, "b.example:8080": b, storage.CrawlWide: wide},
		Labels: map[string]string{"b.example:8080": `<script>alert("b")</script>`},
	}
}

// parse checks the page is well-formed HTML and returns its elements by tag.
func parse(t *testing.T, page []byte) map[string][]*html.Node {
	t.Helper()
	doc, err := html.Parse(bytes.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	els := map[string][]*html.Node{}
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			els[n.Data] = append(els[n.Data], n)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	return els
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func TestWrite(t *testing.T) {
	var buf bytes.Buffer
	if err := Write(&buf, synthetic(), t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	page := buf.Bytes()
	els := parse(t, page)

	// Self-contained: no script, nothing that loads from anywhere.
	if len(els["script"]) != 0 || len(els["link"]) != 0 || len(els["img"]) != 0 || len(els["iframe"]) != 0 {
		t.Errorf("page has script/link/img/iframe elements")
	}
	for _, tag := range []string{"a", "image", "use", "object"} {
		for _, n := range els[tag] {
			t.Errorf("<%s> with %v: the page must not reference anything", tag, n.Attr)
		}
	}
	if bytes.Contains(page, []byte("url(")) || bytes.Contains(page, []byte("@import")) {
		t.Errorf("CSS references an external resource")
	}
	if bytes.Contains(page, []byte(`<script>alert`)) {
		t.Errorf("a host label was not escaped")
	}

	// Charts: throughput, frontier, concurrency; then rate and latency for the two sampled hosts.
	svgs := els["svg"]
	var labels []string
	for _, s := range svgs {
		labels = append(labels, attr(s, "aria-label"))
	}
	if want := "Throughput Frontier Concurrency Rate Latency Rate Latency"; strings.Join(labels, " ") != want {
		t.Errorf("charts %q, want %s", labels, want)
	}
	// Host a's rate chart: two 429 triangles and two retry dots in the rug, two pause bands,
	// and the rate line through all 20 samples; no Crawl-delay line (limit = rate).
	rateA := render(t, svgs[3])
	if n := strings.Count(rateA, `fill="`+colOverLimit+`"><title>`); n != 2 {
		t.Errorf("host a: %d over-limit marks, want 2", n)
	}
	if n := strings.Count(rateA, `<circle`); n != 2+1 { // two retries, plus the legend's dot
		t.Errorf("host a: %d circles, want 3 (2 retries + legend)", n)
	}
	if n := strings.Count(rateA, "paused by Retry-After until"); n != 2 {
		t.Errorf("host a: %d pause bands, want 2", n)
	}
	if strings.Contains(rateA, "Crawl-delay") {
		t.Errorf("host a: Crawl-delay line drawn though the limit equals the rate")
	}
	for _, p := range els["path"] {
		if attr(p, "stroke") == colRate && strings.Count(attr(p, "d"), "L") != 19 {
			t.Errorf("rate line %q: want 20 points", attr(p, "d"))
			break
		}
	}
	// Host b is paced below its controller's rate: the dashed limit line shows.
	if !strings.Contains(render(t, svgs[5]), "Crawl-delay") {
		t.Errorf("host b: no Crawl-delay line though its limit is below its rate")
	}

	// Table: every known host, most pages first, with the figures summed from the samples.
	rows := els["tr"][1:]
	if len(rows) != 3 {
		t.Fatalf("table has %d host rows, want 3", len(rows))
	}
	cells := func(r *html.Node) []string {
		var out []string
		for c := r.FirstChild; c != nil; c = c.NextSibling {
			if c.Type == html.ElementNode && c.Data == "td" {
				out = append(out, strings.TrimSpace(text(c)))
			}
		}
		return out
	}
	a := cells(rows[0])
	// host pages failed queued requests slow-down retries errors ... window phase p50 ...
	if a[0] != "a.example" || a[1] != "160" || a[5] != "2" || a[6] != "2" {
		t.Errorf("row a = %q", a)
	}
	if b := cells(rows[1]); !strings.HasPrefix(b[0], `<script>alert("b")</script>`) || b[16] != "timeout: <oops>" {
		t.Errorf("row b = %q", b)
	}
	if c := cells(rows[2]); c[4] != "0" || c[13] != "–" {
		t.Errorf("row c (never sampled) = %q", c)
	}
}

func render(t *testing.T, n *html.Node) string {
	var b bytes.Buffer
	if err := html.Render(&b, n); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func text(n *html.Node) string {
	if n.Type == html.TextNode {
		return n.Data
	}
	var b strings.Builder
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		b.WriteString(text(c))
	}
	return b.String()
}

func TestWriteWithoutSamples(t *testing.T) {
	d := synthetic()
	d.Series = nil
	var buf bytes.Buffer
	if err := Write(&buf, d, t0); err != nil {
		t.Fatal(err)
	}
	els := parse(t, buf.Bytes())
	if len(els["svg"]) != 0 || !bytes.Contains(buf.Bytes(), []byte("No samples were recorded")) || len(els["tr"]) != 4 {
		t.Errorf("without samples: %d charts, %d table rows; want none, 4, and the note", len(els["svg"]), len(els["tr"]))
	}
}

// crawlSmall crawls the small simulated web into a new directory and returns it.
func crawlSmall(t *testing.T) string {
	t.Helper()
	web, err := simweb.Start(simweb.Small(), &simweb.Options{Seed: 11})
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	cfg := crawler.Defaults()
	cfg.Dir = t.TempDir()
	cfg.Seeds = web.Seeds()
	cfg.InitialRate = 100
	cfg.StatusEvery = 100 * time.Millisecond
	c, err := crawler.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Run(t.Context())
	if cerr := c.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Dir
}

// TestLoadAndScreenshot makes the report of a real crawl and, where a Chromium is installed,
// renders it headless and checks the screenshot shows the charts.
func TestLoadAndScreenshot(t *testing.T) {
	dir := crawlSmall(t)

	// While a crawl holds the store, Load refuses.
	db, err := storage.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); !errors.Is(err, ErrRunning) {
		t.Errorf("Load while the store is held = %v, want ErrRunning", err)
	}
	db.Close()

	d, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Status.Hosts) != 3 || len(d.Series) != 4 || len(d.Series[storage.CrawlWide]) < 3 {
		t.Fatalf("loaded %d hosts, %d series (%d crawl-wide samples); want 3, 4, several",
			len(d.Status.Hosts), len(d.Series), len(d.Series[storage.CrawlWide]))
	}
	htmlPath := filepath.Join(t.TempDir(), "report.html")
	f, err := os.Create(htmlPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := Write(f, d, time.Now()); err != nil {
		t.Fatal(err)
	}
	f.Close()

	browser := FindBrowser()
	if browser == "" && os.Getenv("CI") == "true" {
		t.Fatal("no chromium/chrome on PATH under CI=true: .ci/run installs chromium (apt-get install chromium); the rendering check must run in CI")
	}
	if browser == "" {
		t.Skip("no chromium/chrome on PATH: skipping the rendering check (apt-get install chromium; under CI=true this fails)")
	}
	pngPath := filepath.Join(t.TempDir(), "report.png")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := Screenshot(ctx, browser, htmlPath, pngPath, 900, 1100); err != nil {
		t.Fatal(err)
	}
	pf, err := os.Open(pngPath)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	img, err := png.Decode(pf)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != 900 || b.Dy() != 1100 {
		t.Errorf("screenshot is %v, want 900x1100", b)
	}
	// The charts were drawn: pixels in the colours of the rate and accepted lines and of the
	// queue's line.
	colours := []string{colRate, colAccepted, colQueued}
	want := make([][3]int, len(colours))
	for i, c := range colours {
		if _, err := fmt.Sscanf(c, "#%02x%02x%02x", &want[i][0], &want[i][1], &want[i][2]); err != nil {
			t.Fatal(err)
		}
	}
	counts := make([]int, len(colours))
	bd := img.Bounds()
	for y := bd.Min.Y; y < bd.Max.Y; y++ {
		for x := bd.Min.X; x < bd.Max.X; x++ {
			r, g, b, _ := img.At(x, y).RGBA()
			for i, w := range want {
				if lineColour([3]int{int(r >> 8), int(g >> 8), int(b >> 8)}, w) {
					counts[i]++
				}
			}
		}
	}
	for i, c := range colours {
		if counts[i] < 100 {
			t.Errorf("screenshot has %d pixels of %s; the charts did not render", counts[i], c)
		}
	}
	t.Logf("pixels of %v: %v", colours, counts)
}

// lineColour reports whether pixel p is colour w drawn over the white of a chart at half
// strength or more. A line one pixel wide that falls between two rows of pixels is drawn as two
// rows of its colour blended with the background (anti-aliasing), none of them the colour
// itself; where it falls depends on the data, i.e. on how fast the crawl went.
func lineColour(p, w [3]int) bool {
	num, den := 0, 0
	for c := range 3 {
		num += (255 - p[c]) * (255 - w[c])
		den += (255 - w[c]) * (255 - w[c])
	}
	alpha := float64(num) / float64(den) // least squares: p = 255 + alpha*(w - 255)
	if alpha < 0.5 || alpha > 1.1 {
		return false
	}
	for c := range 3 {
		if absDiff(p[c], int(255+alpha*float64(w[c]-255))) >= 24 {
			return false
		}
	}
	return true
}

func absDiff(a, b int) int {
	if a > b {
		return a - b
	}
	return b - a
}

// TestRequestsNoteNamesUnsampledPages: when the store holds more pages fetched than the
// samples saw (a run killed before its last sample), the requests figure says what it leaves
// out, so that fewer requests than pages reads as what it is.
func TestRequestsNoteNamesUnsampledPages(t *testing.T) {
	d := synthetic()
	sampled := 0
	for _, s := range d.Series[storage.CrawlWide] {
		sampled += s.Pages
	}
	for _, tt := range []struct {
		fetched int
		want    string
	}{{sampled, ""}, {sampled + 36, "when 36 pages were fetched"}} {
		d.Status.Fetched = tt.fetched
		var buf bytes.Buffer
		if err := Write(&buf, d, t0.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		got := bytes.Contains(buf.Bytes(), []byte("not counted: those of the last second of a run killed"))
		if got != (tt.want != "") || !bytes.Contains(buf.Bytes(), []byte(tt.want)) {
			t.Errorf("%d fetched, %d sampled: note shown %v; want %q", tt.fetched, sampled, got, tt.want)
		}
	}
}
