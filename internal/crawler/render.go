package crawler

// renderState is what --render needs while a crawl runs: what the rendered pages fetched.
type renderState struct {
	subs subresources
}
