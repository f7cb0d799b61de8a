// Package report renders `crawl report`: one self-contained HTML page (inline CSS and SVG, no
// script, nothing fetched from the network) that shows how each host's rate limit was learned.
// Per host: the rate the controller chose and the accepted rate over time (the AIMD sawtooth),
// 429/503 replies and retries marked on the time axis, Retry-After pauses shaded, latency p50
// and p95 over time; a summary table of every host; and the crawl-wide throughput, queue and
// requests in flight.
//
// The figures come from the samples the crawl loop records in the store (storage.Sample, about
// one per host per second while the host is active) and from the crawl's status.
//
// The charts are SVG written by hand rather than drawn by a charting library: the page must
// open offline and stay small, and the libraries that draw these charts well (go-echarts and
// the like) ship a JavaScript runtime of about a megabyte that would have to be inlined.
//
// Screenshot renders a report to PNG with a headless Chromium, for the README and for tests
// that check the page really renders.
package report
