package crawler

import (
	"cmp"
	"fmt"
	"time"

	"github.com/crawl-project/crawl/internal/render"
)

// RenderMode says which pages are rendered in a headless browser (--render).
type RenderMode uint8

// Render modes.
const (
	RenderNever  RenderMode = iota // no page is rendered; no browser is started (the zero value)
	RenderAuto                     // a page is rendered when its HTML is an application shell (needsRender)
	RenderAlways                   // every HTML page is rendered
)

var renderModeNames = [...]string{RenderNever: "never", RenderAuto: "auto", RenderAlways: "always"}

func (m RenderMode) String() string {
	if int(m) < len(renderModeNames) {
		return renderModeNames[m]
	}
	return fmt.Sprintf("RenderMode(%d)", int(m))
}

// ParseRenderMode reads a --render value: never, auto or always.
func ParseRenderMode(s string) (RenderMode, error) {
	for i, n := range renderModeNames {
		if s == n {
			return RenderMode(i), nil
		}
	}
	return RenderNever, fmt.Errorf("--render takes never, auto or always, not %q", s)
}

// Set and the String above make *RenderMode a flag.Value.
func (m *RenderMode) Set(s string) error {
	v, err := ParseRenderMode(s)
	if err != nil {
		return err
	}
	*m = v
	return nil
}

// MarshalText and UnmarshalText keep a RenderMode as its word in the settings record.
func (m RenderMode) MarshalText() ([]byte, error) {
	if m > RenderAlways {
		return nil, fmt.Errorf("bad render mode %d", int(m))
	}
	return []byte(m.String()), nil
}

// UnmarshalText: see MarshalText.
func (m *RenderMode) UnmarshalText(b []byte) error { return m.Set(string(b)) }

// Render is how pages are rendered (--render, --render-timeout, --render-tabs, --browser): one
// group of the crawl's Settings, under one key of the settings record. Mode and Timeout are
// stored with the crawl's settings; Tabs and Browser belong to the machine a run is on and are
// not. A zero field takes its default (Config.WithDefaults).
type Render struct {
	Mode    RenderMode    `json:"mode,omitempty"`    // zero: RenderNever
	Timeout time.Duration `json:"timeout,omitempty"` // per page, its sub-requests included; zero: DefaultRenderTimeout
	Tabs    int           `json:"-"`                 // pages rendered at once; 0: a default from cores and memory
	Browser string        `json:"-"`                 // the browser's executable; "": looked up on PATH
}

// DefaultRenderTimeout is --render-timeout's default: the browser's own.
const DefaultRenderTimeout = render.DefaultTimeout

// maxRenderTabs bounds --render-tabs: each tab is a renderer process of a hundred MB or more.
const maxRenderTabs = 64

// validate reports the first impossible render setting of r, its defaults filled in, naming
// its flag.
func (r *Render) validate() error {
	switch {
	case r.Mode > RenderAlways:
		return fmt.Errorf("--render takes never, auto or always, not %v", r.Mode)
	case r.Tabs < 0 || r.Tabs > maxRenderTabs:
		return fmt.Errorf("--render-tabs must be between 0 (a default from cores and memory) and %d, not %d", maxRenderTabs, r.Tabs)
	case r.Timeout <= 0:
		return fmt.Errorf("--render-timeout must be positive, not %v", r.Timeout)
	}
	return nil
}

// flags returns the stored render settings as command-line flags, a zero timeout (a store
// from before it was kept) as its default. A crawl that renders nothing names neither, so
// its settings read as before rendering existed.
func (r Render) flags() []Setting {
	if r.Mode == RenderNever {
		return []Setting{{Flag: "render"}, {Flag: "render-timeout"}}
	}
	return []Setting{
		{Flag: "render", Values: []string{r.Mode.String()}},
		{Flag: "render-timeout", Values: []string{cmp.Or(r.Timeout, DefaultRenderTimeout).String()}},
	}
}
