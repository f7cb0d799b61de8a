package crawler

import "github.com/crawl-project/crawl/frontier"

// resultChunk is the most links and exclusions one frontier transaction of a page's result
// holds. A page may name up to fetch.MaxLinks URLs (and a sitemap as many), all on new hosts:
// committed at once, they would hold the store's one writer, and with it every other host's
// commit, for the whole of them.
const resultChunk = 1000

// addAhead returns r with at most resultChunk links and exclusions left for Complete, having
// recorded the others first through Add and Exclude, in order, resultChunk at a time. The page
// and its URL's new state are still committed after every link: if the crawl stops before
// Complete, the URL is still queued and fetched again, and the links it recorded count as seen.
// A result of another kind than Fetched is returned as it is.
func (c *Crawler) addAhead(r frontier.Result) (frontier.Result, error) {
	if r.Kind != frontier.Fetched {
		return r, nil
	}
	err := c.record(&r, resultChunk)
	return r, err
}

// record records r's links, then its exclusions, through Add and Exclude, resultChunk at a
// time, while more than keep of them are left in r.
func (c *Crawler) record(r *frontier.Result, keep int) error {
	for len(r.Links)+len(r.Excluded) > keep {
		if n := min(len(r.Links), resultChunk); n > 0 {
			if _, err := c.fr.Add(r.Links[:n]); err != nil {
				return err
			}
			r.Links = r.Links[n:]
			continue
		}
		n := min(len(r.Excluded), resultChunk)
		if err := c.fr.Exclude(r.Excluded[:n]); err != nil {
			return err
		}
		r.Excluded = r.Excluded[n:]
	}
	return nil
}
