package main

import (
	"flag"
	"fmt"
	"io"
	"os/exec"
	"strings"

	"github.com/crawl-project/crawl/internal/crawler"
	"github.com/crawl-project/crawl/internal/render"
)

// renderFlags registers the rendering flags on fs, filling r.
func renderFlags(fs *flag.FlagSet, r *crawler.Render) {
	fs.Var(&r.Mode, "render", "render pages in a headless Chromium, every sub-request sent through the crawl's gates: never, auto (pages that are application shells: little text, scripts) or always")
	fs.IntVar(&r.Tabs, "render-tabs", r.Tabs, "pages rendered at once (0: a default from cores and memory); not stored")
	fs.StringVar(&r.Browser, "browser", r.Browser, "Chromium or Chrome `executable` for --render (default: chromium-headless-shell, chromium, chromium-browser, google-chrome… on PATH); not stored")
	durationVar(fs, &r.Timeout, "render-timeout", r.Timeout, "most time one page may take to render, its sub-requests included (a `duration`); a page cut by it is kept as rendered")
}

// printRender says how many pages were rendered, when the crawl renders pages.
func printRender(w io.Writer, r *crawler.RenderCounts) {
	if r == nil {
		return
	}
	fmt.Fprintf(w, "  rendered %d of %d HTML pages (--render %s)", r.Rendered, r.Of, r.Mode)
	if r.Cut > 0 {
		fmt.Fprintf(w, "; %d cut by a cap and kept as rendered", r.Cut)
	}
	if r.Failed > 0 {
		fmt.Fprintf(w, "; %d failed to render in this run", r.Failed)
	}
	fmt.Fprintln(w)
}

// checkBrowser returns a usage error when cfg renders pages and no browser can be run: none on
// PATH, or --browser naming none. stored says --render came from the crawl's stored settings.
func checkBrowser(r crawler.Render, stored bool) error {
	if r.Mode == crawler.RenderNever {
		return nil
	}
	from := "--render " + r.Mode.String()
	if stored {
		from += " (stored with the crawl's settings; --render never crawls without a browser)"
	}
	if r.Browser != "" {
		if _, err := exec.LookPath(r.Browser); err != nil {
			return fmt.Errorf("%s needs a browser, and --browser %s is none: %v", from, r.Browser, err)
		}
		return nil
	}
	if render.FindBrowser() == "" {
		return fmt.Errorf("%s needs Chromium or Chrome, and none is on PATH (looked for %s): install it (Debian: apt-get install chromium-headless-shell, or chromium) or name one with --browser PATH",
			from, strings.Join(render.BrowserNames(), ", "))
	}
	return nil
}
