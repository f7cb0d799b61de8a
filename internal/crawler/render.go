package crawler

// renderState is what --render needs while a crawl runs: what the rendered pages fetched.
type renderState struct {
	subs   subresources
	counts renderCounters // all runs: counted from the store by initSubresources, then as pages are stored
}
