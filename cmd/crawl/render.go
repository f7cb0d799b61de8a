package main

import (
	"flag"

	"github.com/crawl-project/crawl/internal/crawler"
)

// renderFlags registers the rendering flags on fs, filling r.
func renderFlags(fs *flag.FlagSet, r *crawler.Render) {
	fs.Var(&r.Mode, "render", "render pages in a headless Chromium, every sub-request sent through the crawl's gates: never, auto (pages that are application shells: little text, scripts) or always")
	fs.IntVar(&r.Tabs, "render-tabs", r.Tabs, "pages rendered at once (0: a default from cores and memory); not stored")
	fs.StringVar(&r.Browser, "browser", r.Browser, "Chromium or Chrome `executable` for --render (default: chromium, chromium-browser, google-chrome… on PATH); not stored")
	durationVar(fs, &r.Timeout, "render-timeout", r.Timeout, "most time one page may take to render, its sub-requests included (a `duration`); a page cut by it is kept as rendered")
}
