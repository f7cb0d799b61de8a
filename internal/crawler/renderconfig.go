package crawler

import (
	"fmt"
	"time"
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

// Render is how pages are rendered (--render, --render-tabs, --browser, --render-timeout).
// Mode and Timeout are settings, stored with the crawl's; Tabs and Browser belong to the
// machine a run is on.
type Render struct {
	Mode    RenderMode
	Tabs    int           // pages rendered at once; 0: a default from cores and memory
	Browser string        // the browser's executable; "": looked up on PATH
	Timeout time.Duration // per page, its sub-requests included
}

// DefaultRenderTimeout is --render-timeout's default.
const DefaultRenderTimeout = 30 * time.Second

// maxRenderTabs bounds --render-tabs: each tab is a renderer process of a few hundred MB.
const maxRenderTabs = 64

// validate reports the first impossible render setting, naming its flag.
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

// RenderSettings are the stored part of Render.
type RenderSettings struct {
	Mode    string        `json:"mode,omitempty"`    // "" in a store from before it was kept: never
	Timeout time.Duration `json:"timeout,omitempty"` // 0 in a store from before it was kept: the default
}

// renderSettingsOf returns the stored part of r.
func renderSettingsOf(r Render) RenderSettings {
	return RenderSettings{Mode: r.Mode.String(), Timeout: r.Timeout}
}

// withDefaults fills in what a store from before the render settings were kept lacks.
func (s RenderSettings) withDefaults() RenderSettings {
	if s.Mode == "" {
		s.Mode = RenderNever.String()
	}
	if s.Timeout == 0 {
		s.Timeout = DefaultRenderTimeout
	}
	return s
}

// flags returns the render settings as command-line flags.
func (s RenderSettings) flags() []Setting {
	s = s.withDefaults()
	return []Setting{
		{Flag: "render", Values: []string{s.Mode}},
		{Flag: "render-timeout", Values: []string{s.Timeout.String()}},
	}
}

// apply sets r's stored part from s.
func (s RenderSettings) apply(r *Render) error {
	s = s.withDefaults()
	m, err := ParseRenderMode(s.Mode)
	if err != nil {
		return err
	}
	r.Mode, r.Timeout = m, s.Timeout
	return nil
}
