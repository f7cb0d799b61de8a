package render

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// earlyAnswerer is an Answerer and EarlyReader: /links.json names /b, /held.png is held until
// a DOM given to Early links to /b (or for hold); every DOM given to Early is kept.
type earlyAnswerer struct {
	hold   time.Duration
	linked chan struct{} // closed once Early saw the link to /b
	once   sync.Once

	mu       sync.Mutex
	doms     []string
	byLink   bool // the image was answered because Early saw the link
	answered bool
}

func (a *earlyAnswerer) Answer(ctx context.Context, r *Request) (*Response, error) {
	switch {
	case strings.HasSuffix(r.URL, "/links.json"):
		return &Response{Status: 200, Header: map[string][]string{"Content-Type": {"application/json"}}, Body: []byte(`["/b"]`)}, nil
	case strings.HasSuffix(r.URL, "/held.png"):
		byLink := false
		select {
		case <-a.linked:
			byLink = true
		case <-time.After(a.hold):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		a.mu.Lock()
		a.byLink, a.answered = byLink, true
		a.mu.Unlock()
		return &Response{Status: 200, Header: map[string][]string{"Content-Type": {"image/png"}}, Body: []byte(tinyPNGForTests)}, nil
	}
	return nil, errors.New("no")
}

func (a *earlyAnswerer) Early(dom []byte) {
	a.mu.Lock()
	a.doms = append(a.doms, string(dom))
	a.mu.Unlock()
	if strings.Contains(string(dom), `href="/b"`) {
		a.once.Do(func() { close(a.linked) })
	}
}

// TestEarlyRead: a page whose script writes a link from an API's answer while its image is
// held gives its DOM, link and all, to EarlyReader.Early before the image is answered; its
// Result still holds the whole DOM. A page with nothing but content requests pending is never
// read early.
func TestEarlyRead(t *testing.T) {
	b := startBrowser(t, Options{Tabs: 1})
	const hold = 10 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	page := `<p>A</p><img src="/held.png"><script>
fetch('/links.json').then((r) => r.json()).then((ls) => {
  for (const h of ls) { const a = document.createElement('a'); a.href = h; a.textContent = h; document.body.appendChild(a); }
});
</script>`
	t.Run("held image", func(t *testing.T) {
		a := &earlyAnswerer{hold: hold, linked: make(chan struct{})}
		res, err := b.Render(ctx, "http://site.test/", htmlDoc(page), a)
		if err != nil {
			t.Fatal(err)
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		if !a.answered || !a.byLink {
			t.Errorf("the image was answered after its %v hold ran out, not because Early saw the link (Early got %d DOMs)", hold, len(a.doms))
		}
		if len(a.doms) == 0 || len(a.doms) > maxEarlyReads {
			t.Errorf("Early called %d times, want 1 to %d", len(a.doms), maxEarlyReads)
		}
		if !strings.Contains(string(res.DOM), `href="/b"`) || !strings.Contains(string(res.DOM), "held.png") || res.Cut != CutNone {
			t.Errorf("Result: cut %v, DOM %.300s", res.Cut, res.DOM)
		}
	})
	t.Run("no passive request", func(t *testing.T) {
		a := &earlyAnswerer{hold: hold, linked: make(chan struct{})}
		res, err := b.Render(ctx, "http://site.test/", htmlDoc(strings.Replace(page, `<img src="/held.png">`, "", 1)), a)
		if err != nil {
			t.Fatal(err)
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		if len(a.doms) != 0 {
			t.Errorf("Early called %d times for a page with no image, font or medium pending", len(a.doms))
		}
		if !strings.Contains(string(res.DOM), `href="/b"`) {
			t.Errorf("Result's DOM lacks the link: %.300s", res.DOM)
		}
	})
}
