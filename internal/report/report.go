package report

import (
	"cmp"
	"fmt"
	"html/template"
	"io"
	"math"
	"path/filepath"
	"slices"
	"time"

	"github.com/crawl-project/crawl/internal/crawler"
	"github.com/crawl-project/crawl/storage"
)

// Limits on how much one page shows, so a crawl of many hosts still makes a readable report:
// the table scrolls within a box of bounded height, so the charts below it stay near the top.
const (
	MaxHostCharts = 24  // hosts drawn with charts, the busiest
	MaxTableRows  = 500 // hosts listed in the summary table, the busiest
)

// Write renders the report of d as one self-contained HTML page. now is the time printed as
// "generated".
func Write(w io.Writer, d *Data, now time.Time) error {
	return pageTmpl.Execute(w, build(d, now))
}

type view struct {
	Dir, Generated, Period string
	KPIs                   []kpi
	NoSamples              bool
	Throughput             template.HTML
	Crawl                  []template.HTML
	Rows                   []row
	MoreRows               int // contacted hosts left out of the table
	NotCrawled             int // hosts only linked to (Status.HostsNotCrawled)
	NotCrawledQueued       int
	Hosts                  []hostView
	MoreHosts              int // sampled hosts left without charts
	Colors                 map[string]string
}

type kpi struct{ Label, Value, Note string }

type row struct {
	Label, Host                          string
	Pages, Failed, Queued                int
	Requests, OverLimit, Retries, Errors int
	Rate, Peak, Accepted, Window, Phase  string
	P50, P95, Paused, LastError          string
}

type hostView struct {
	Label, Host string
	Summary     string
	Charts      []template.HTML
}

// builder holds the time axis shared by every chart.
type builder struct {
	t0   time.Time
	xMax float64
}

func (b *builder) xs(t time.Time) float64 { return t.Sub(b.t0).Seconds() }

// clock formats seconds since the start as the time axis labels them.
func (b *builder) clock(s float64) string { return fmtClock(s, b.xMax >= 3600) }

// requestsNote says what the requests figure counts: the requests sampled while crawling. A
// run killed (or crashed) loses its last interval's sample, so unsampled pages fetched (the
// store's count less the samples') are named, their requests not being counted.
func requestsNote(unsampled int, noSamples bool) string {
	if unsampled <= 0 || noSamples {
		return "robots.txt included"
	}
	return fmt.Sprintf("robots.txt included; not counted: those of the last second of a run killed, when %d pages were fetched", unsampled)
}

func build(d *Data, now time.Time) view {
	v := view{
		Dir: d.Dir, Generated: now.Format("2006-01-02 15:04:05 MST"),
		Colors: map[string]string{"rate": colRate, "accepted": colAccepted, "over": colOverLimit, "retry": colRetry,
			"pause": colPause, "p50": colP50, "p95": colP95},
	}
	if abs, err := filepath.Abs(d.Dir); err == nil {
		v.Dir = abs
	}
	var b builder
	var tEnd time.Time
	for _, ss := range d.Series {
		for _, s := range ss {
			if start := s.At.Add(-s.Span); b.t0.IsZero() || start.Before(b.t0) {
				b.t0 = start
			}
			if s.At.After(tEnd) {
				tEnd = s.At
			}
		}
	}
	b.xMax = max(tEnd.Sub(b.t0).Seconds(), 1)
	wide := d.Series[storage.CrawlWide]
	v.NoSamples = len(wide) == 0

	// Crawl-wide figures.
	var active time.Duration
	runs, reqs, over, retries, errs, pages := 0, 0, 0, 0, 0, 0
	for _, s := range wide {
		active += s.Span
		if s.Span == 0 {
			runs++
		}
		reqs, over, retries, errs, pages = reqs+s.Requests, over+s.OverLimit, retries+s.Retries, errs+s.Errors, pages+s.Pages
	}
	st := d.Status
	perSec := ""
	if active > 0 {
		perSec = fmt.Sprintf("%.1f pages/s on average", float64(pages)/active.Seconds())
	}
	v.KPIs = []kpi{
		{"pages fetched", fmt.Sprint(st.Fetched), perSec},
		{"failed", fmt.Sprint(st.Failed), ""},
		{"excluded", fmt.Sprint(st.Excluded), ""},
		{"queued", fmt.Sprint(st.Queued), ""},
		{"hosts crawled", fmt.Sprint(len(st.Hosts) + st.HostsNotListed), notCrawledNote(st.HostsNotCrawled)},
		{"requests", fmt.Sprint(reqs), requestsNote(st.Fetched-pages, v.NoSamples)},
		{"429/503 replies", fmt.Sprint(over), "the host said slow down"},
		{"retries", fmt.Sprint(retries), ""},
		{"errors", fmt.Sprint(errs), "no response, or 5xx"},
	}
	if !v.NoSamples {
		v.Period = fmt.Sprintf("%s to %s · %s crawling in %d run%s", b.t0.Local().Format("2006-01-02 15:04:05"),
			tEnd.Local().Format("15:04:05"), active.Round(100*time.Millisecond), max(runs, 1), plural(max(runs, 1)))
		v.Throughput = template.HTML(b.throughputChart(wide).svg())
		v.Crawl = []template.HTML{
			template.HTML(b.queueChart(wide).svg()),
			template.HTML(b.flightChart(wide).svg()),
		}
	}

	// Per host, busiest first: most pages fetched plus failed, then most requests sampled.
	v.NotCrawled, v.NotCrawledQueued = st.HostsNotCrawled, st.HostsNotCrawledQueued
	rows := make([]row, len(st.Hosts))
	order := make([]int, len(st.Hosts))
	for i, h := range st.Hosts {
		rows[i] = hostRow(h, d.Series[h.Host], d.Labels[h.Host])
		order[i] = i
	}
	slices.SortStableFunc(order, func(i, j int) int {
		a, b := rows[i], rows[j]
		return cmp.Or(cmp.Compare(b.Pages+b.Failed, a.Pages+a.Failed), cmp.Compare(b.Requests, a.Requests))
	})
	for _, i := range order {
		h, r := st.Hosts[i], rows[i]
		ss := d.Series[h.Host]
		if len(v.Rows) < MaxTableRows {
			v.Rows = append(v.Rows, r)
		} else {
			v.MoreRows++
		}
		if len(ss) == 0 {
			continue
		}
		if len(v.Hosts) == MaxHostCharts {
			v.MoreHosts++
			continue
		}
		hv := hostView{Label: cmp.Or(d.Labels[h.Host], h.Host), Host: h.Host,
			Summary: fmt.Sprintf("%d pages · %d requests · %d × 429/503 · %d retries · rate now %s/s (peak %s/s)",
				h.Pages, r.Requests, r.OverLimit, r.Retries, r.Rate, r.Peak)}
		if hv.Label == h.Host {
			hv.Host = ""
		}
		hv.Charts = []template.HTML{template.HTML(b.rateChart(ss).svg()), template.HTML(b.latencyChart(ss).svg())}
		v.Hosts = append(v.Hosts, hv)
	}
	return v
}

// notCrawledNote is the hosts figure's note: how many more hosts were only linked to.
func notCrawledNote(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("+%d linked to, not crawled", n)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// gap reports whether two consecutive samples of a series are too far apart to be joined by
// a line: the series was idle, or a new run started.
func gap(a, b storage.Sample) bool {
	return b.Span == 0 || b.At.Sub(a.At) > 2*max(a.Span, b.Span)+time.Second
}

// line turns the samples into points of f, skipping samples f has no value for and breaking
// the line at gaps.
func (b *builder) line(ss []storage.Sample, f func(storage.Sample) (float64, bool)) []pt {
	var pts []pt
	var prev *storage.Sample
	newRun := false
	for i := range ss {
		s := &ss[i]
		newRun = newRun || s.Span == 0 // never join across the start of a run
		y, ok := f(*s)
		if !ok {
			continue
		}
		if prev != nil && (newRun || gap(*prev, *s)) {
			pts = append(pts, pt{b.xs(s.At), math.NaN()})
		}
		newRun = false
		pts = append(pts, pt{b.xs(s.At), y})
		prev = s
	}
	return pts
}

func perSecond(count func(storage.Sample) int) func(storage.Sample) (float64, bool) {
	return func(s storage.Sample) (float64, bool) {
		if s.Span <= 0 {
			return 0, false
		}
		return float64(count(s)) / s.Span.Seconds(), true
	}
}

func always(f func(storage.Sample) float64) func(storage.Sample) (float64, bool) {
	return func(s storage.Sample) (float64, bool) { return f(s), true }
}

// eventMarks marks the samples with over-limit replies (row 0) and retries (row 1) in the
// middle of their interval.
func (b *builder) eventMarks(ss []storage.Sample) []mark {
	var ms []mark
	for _, s := range ss {
		x := b.xs(s.At.Add(-s.Span / 2))
		at := b.clock(b.xs(s.At))
		if s.OverLimit > 0 {
			ms = append(ms, mark{x: x, row: 0, color: colOverLimit, name: "429/503",
				title: fmt.Sprintf("%d repl%s 429/503 just before %s", s.OverLimit, pluralY(s.OverLimit), at)})
		}
		if s.Retries > 0 {
			ms = append(ms, mark{x: x, row: 1, color: colRetry, name: "retries",
				title: fmt.Sprintf("%d retr%s scheduled just before %s", s.Retries, pluralY(s.Retries), at)})
		}
	}
	return ms
}

func pluralY(n int) string {
	if n == 1 {
		return "y"
	}
	return "ies"
}

func (b *builder) throughputChart(wide []storage.Sample) *chart {
	return &chart{
		title: "Throughput", unit: "per second", xMax: b.xMax, width: 2*chartW + 20,
		series: []series{
			{name: "requests", color: colRequests, pts: b.line(wide, perSecond(func(s storage.Sample) int { return s.Requests }))},
			{name: "pages", color: colPages, fill: true, pts: b.line(wide, perSecond(func(s storage.Sample) int { return s.Pages }))},
		},
		marks: b.eventMarks(wide),
	}
}

func (b *builder) queueChart(wide []storage.Sample) *chart {
	return &chart{
		title: "Frontier", unit: "URLs queued", xMax: b.xMax,
		series: []series{{name: "queued", color: colQueued, fill: true, pts: b.line(wide, always(func(s storage.Sample) float64 { return s.Queued }))}},
	}
}

func (b *builder) flightChart(wide []storage.Sample) *chart {
	return &chart{
		title: "Concurrency", xMax: b.xMax,
		series: []series{
			{name: "requests in flight (mean)", color: colInFlight, pts: b.line(wide, always(func(s storage.Sample) float64 { return s.InFlight }))},
			{name: "active hosts", color: colHosts, pts: b.line(wide, always(func(s storage.Sample) float64 { return s.Hosts }))},
		},
	}
}

func (b *builder) rateChart(ss []storage.Sample) *chart {
	c := &chart{title: "Rate", unit: "requests/s", xMax: b.xMax, marks: b.eventMarks(ss)}
	capped := false
	for _, s := range ss {
		if math.Abs(s.Limit-s.Rate) > 0.01*s.Rate {
			capped = true
		}
	}
	c.series = append(c.series, series{name: "accepted", color: colAccepted, pts: b.line(ss, always(func(s storage.Sample) float64 { return s.Accepted }))})
	if capped {
		c.series = append(c.series, series{name: "paced at (Crawl-delay)", color: colLimit, dash: true,
			pts: b.line(ss, always(func(s storage.Sample) float64 { return s.Limit }))})
	}
	c.series = append(c.series, series{name: "rate chosen", color: colRate, pts: b.line(ss, always(func(s storage.Sample) float64 { return s.Rate }))})
	c.bands = b.pauses(ss)
	return c
}

func (b *builder) latencyChart(ss []storage.Sample) *chart {
	ms := func(f func(storage.Sample) time.Duration) func(storage.Sample) (float64, bool) {
		return func(s storage.Sample) (float64, bool) {
			return float64(f(s)) / float64(time.Millisecond), s.Requests > 0
		}
	}
	return &chart{
		title: "Latency", unit: "ms", xMax: b.xMax,
		series: []series{
			{name: "p95", color: colP95, pts: b.line(ss, ms(func(s storage.Sample) time.Duration { return s.P95 }))},
			{name: "p50", color: colP50, pts: b.line(ss, ms(func(s storage.Sample) time.Duration { return s.P50 }))}, // drawn over p95 where they meet
		},
	}
}

// pauses returns the Retry-After pauses of a host as bands, overlapping ones merged.
func (b *builder) pauses(ss []storage.Sample) []band {
	var out []band
	for _, s := range ss {
		if s.PausedUntil.IsZero() {
			continue
		}
		x0, x1 := b.xs(s.At.Add(-s.Span)), b.xs(s.PausedUntil)
		if n := len(out); n > 0 && x0 <= out[n-1].x1 {
			out[n-1].x1 = max(out[n-1].x1, x1)
		} else {
			out = append(out, band{x0: x0, x1: x1})
		}
	}
	for i := range out {
		out[i].title = fmt.Sprintf("paused by Retry-After until %s", b.clock(out[i].x1))
	}
	return out
}

// hostRow is a host's line in the summary table: counts from the status, request figures
// summed over its samples.
func hostRow(h crawler.HostStatus, ss []storage.Sample, label string) row {
	r := row{Label: cmp.Or(label, h.Host), Host: h.Host, Pages: h.Pages, Failed: h.Failed, Queued: h.Queued,
		Rate: fmtRate(h.Rate), Accepted: fmtRate(h.AcceptedRate), Window: fmt.Sprint(h.Window), Phase: h.Phase,
		Paused: "", LastError: h.LastError}
	if r.Label == h.Host {
		r.Host = ""
	}
	peak := 0.0
	var p50, p95 float64
	for _, s := range ss {
		r.Requests += s.Requests
		r.OverLimit += s.OverLimit
		r.Retries += s.Retries
		r.Errors += s.Errors
		peak = max(peak, s.Rate)
		if s.Requests > 0 {
			r.Accepted = fmtRate(s.Accepted) // the last measured while the host was busy
		}
		p50 += float64(s.P50) * float64(s.Requests)
		p95 += float64(s.P95) * float64(s.Requests)
	}
	r.Peak = fmtRate(peak)
	r.P50, r.P95 = "–", "–"
	if r.Requests > 0 {
		r.P50 = fmtMs(p50 / float64(r.Requests))
		r.P95 = fmtMs(p95 / float64(r.Requests))
	}
	if h.PausedUntil != nil {
		r.Paused = h.PausedUntil.Local().Format("15:04:05")
	}
	return r
}

func fmtRate(r float64) string {
	switch {
	case r >= 100:
		return fmt.Sprintf("%.0f", r)
	case r >= 10:
		return fmt.Sprintf("%.1f", r)
	}
	return fmt.Sprintf("%.2f", r)
}

func fmtMs(ns float64) string {
	ms := ns / float64(time.Millisecond)
	if ms >= 10 {
		return fmt.Sprintf("%.0f", ms)
	}
	return fmt.Sprintf("%.1f", ms)
}

var pageTmpl = template.Must(template.New("report").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>crawl report · {{.Dir}}</title>
<style>
:root { color-scheme: light; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; color: #0f172a; background: #f8fafc; margin: 0; }
main { max-width: 1240px; margin: 0 auto; padding: 24px 28px 40px; }
h1 { font-size: 22px; margin: 0 0 2px; }
h2 { font-size: 16px; margin: 28px 0 10px; }
h3 { font-size: 14px; margin: 0 0 6px; }
h3 .hk { font-weight: 400; color: #64748b; margin-left: 6px; }
.sub, .note, footer { color: #475569; font-size: 13px; }
.note { max-width: 980px; }
.kpis { display: grid; grid-template-columns: repeat(auto-fill, minmax(112px, 1fr)); gap: 10px; margin-top: 16px; }
.kpi { background: #fff; border: 1px solid #e2e8f0; border-radius: 8px; padding: 8px 12px; }
.kpi .v { font-size: 22px; font-weight: 600; font-variant-numeric: tabular-nums; }
.kpi .l { color: #475569; font-size: 12px; }
.kpi .n { color: #94a3b8; font-size: 11px; }
.grid3 { display: grid; grid-template-columns: repeat(3, 1fr); gap: 12px; }
.grid2 { display: grid; grid-template-columns: repeat(2, 1fr); gap: 12px; }
.card { background: #fff; border: 1px solid #e2e8f0; border-radius: 8px; padding: 6px 8px 2px; }
.host { background: #fff; border: 1px solid #e2e8f0; border-radius: 8px; padding: 12px 14px 6px; margin-bottom: 14px; }
.host .sum { color: #475569; font-size: 12px; margin-bottom: 4px; }
svg.chart { width: 100%; height: auto; display: block; font-family: inherit; }
svg .ct { font-size: 13px; font-weight: 600; fill: #0f172a; }
svg .cu { font-weight: 400; fill: #64748b; }
svg .lg { font-size: 11px; fill: #334155; }
svg .yl { font-size: 10px; fill: #64748b; text-anchor: end; }
svg .xl { font-size: 10px; fill: #64748b; text-anchor: middle; }
svg .grid { stroke: #eef2f6; stroke-width: 1; }
svg .frame { fill: none; stroke: #cbd5e1; stroke-width: 1; }
svg .rug { stroke: #e2e8f0; stroke-width: 1; stroke-dasharray: 2 2; }
table { border-collapse: collapse; width: 100%; background: #fff; border: 1px solid #e2e8f0; font-size: 12px; font-variant-numeric: tabular-nums; }
th, td { padding: 4px 7px; border-bottom: 1px solid #eef2f6; text-align: right; white-space: nowrap; }
th { background: #f1f5f9; font-weight: 600; color: #334155; position: sticky; top: 0; }
td.h, th.h { text-align: left; }
td.h { white-space: normal; min-width: 150px; }
td.h .hk { color: #94a3b8; font-size: 11px; }
.scroll { overflow-x: auto; }
.rows { max-height: 560px; overflow-y: auto; }
td.e { text-align: left; color: #b91c1c; max-width: 260px; overflow: hidden; text-overflow: ellipsis; }
tr:nth-child(even) td { background: #fafbfc; }
.key { display: inline-block; width: 10px; height: 3px; vertical-align: middle; margin: 0 3px 2px 0; }
</style>
</head>
<body>
<main>
<h1>Crawl report</h1>
<div class="sub">{{.Dir}}{{if .Period}} · {{.Period}}{{end}} · generated {{.Generated}}</div>
<div class="kpis">{{range .KPIs}}<div class="kpi"><div class="v">{{.Value}}</div><div class="l">{{.Label}}</div>{{if .Note}}<div class="n">{{.Note}}</div>{{end}}</div>{{end}}</div>
{{if .NoSamples}}<p class="note">No samples were recorded in this store (it was crawled by a version of crawl that did not record them), so there are no charts; the table shows the final figures.</p>{{end}}
{{if .Crawl}}<h2>Whole crawl</h2>
<div class="card">{{.Throughput}}</div>
<div class="grid2" style="margin-top:12px">{{range .Crawl}}<div class="card">{{.}}</div>{{end}}</div>{{end}}
<h2>Hosts</h2>
<div class="scroll rows"><table>
<thead><tr><th class="h">host</th><th>pages</th><th>failed</th><th>queued</th><th>requests</th><th>slow-down replies</th><th>retries</th><th>errors</th><th>rate now /s</th><th>peak /s</th><th>accepted /s</th><th>window</th><th>phase</th><th>p50 ms</th><th>p95 ms</th><th>paused until</th><th class="h">last error</th></tr></thead>
<tbody>{{range .Rows}}<tr><td class="h">{{.Label}}{{if .Host}}<div class="hk">{{.Host}}</div>{{end}}</td><td>{{.Pages}}</td><td>{{.Failed}}</td><td>{{.Queued}}</td><td>{{.Requests}}</td><td>{{.OverLimit}}</td><td>{{.Retries}}</td><td>{{.Errors}}</td><td>{{.Rate}}</td><td>{{.Peak}}</td><td>{{.Accepted}}</td><td>{{.Window}}</td><td>{{.Phase}}</td><td>{{.P50}}</td><td>{{.P95}}</td><td>{{.Paused}}</td><td class="e" title="{{.LastError}}">{{.LastError}}</td></tr>
{{end}}</tbody>
</table></div>
{{if .MoreRows}}<p class="note">… and {{.MoreRows}} more hosts crawled (crawl status --data DIR --all lists them).</p>{{end}}
{{if .NotCrawled}}<p class="note">and {{.NotCrawled}} host{{if ne .NotCrawled 1}}s{{end}} linked to but not crawled{{if .NotCrawledQueued}} ({{.NotCrawledQueued}} with URLs queued){{end}}.</p>{{end}}
<p class="note">requests, 429/503, retries, errors and latency are summed over the samples recorded while crawling; latency is the request-weighted mean of each interval's p50 and p95. Rate now and window are the host's learned state now; accepted is the last rate of successful replies measured while it was busy.</p>
{{if .Hosts}}<h2>Per host{{if .MoreHosts}}: the {{len .Hosts}} busiest{{end}}</h2>
<p class="note"><span class="key" style="background:{{index .Colors "rate"}}"></span><b>rate chosen</b>: the requests per second the host's controller allows. It climbs while replies come back fine and drops when the host answers 429 or 503 (<span style="color:{{index .Colors "over"}}">▲</span>) or its latency rises: the sawtooth of additive increase, multiplicative decrease.
<span class="key" style="background:{{index .Colors "accepted"}}"></span><b>accepted</b>: successful replies per second the controller measured. <span style="color:{{index .Colors "retry"}}">●</span> retries scheduled; <span class="key" style="background:{{index .Colors "pause"}};height:9px"></span> paused by Retry-After. Latency: <span class="key" style="background:{{index .Colors "p50"}}"></span>p50 and <span class="key" style="background:{{index .Colors "p95"}}"></span>p95 of the requests that ended in each interval. Every chart shares the time axis (minutes:seconds since the crawl started).</p>
{{range .Hosts}}<div class="host"><h3>{{.Label}}{{if .Host}}<span class="hk">{{.Host}}</span>{{end}}</h3><div class="sum">{{.Summary}}</div><div class="grid2">{{range .Charts}}<div>{{.}}</div>{{end}}</div></div>
{{end}}{{if .MoreHosts}}<p class="note">… charts for {{.MoreHosts}} more hosts are not shown (the {{len .Hosts}} busiest are: most pages fetched and failed, then most requests).</p>{{end}}{{end}}
<footer>Made by <code>crawl report --data {{.Dir}}</code>. Self-contained: no script, nothing loaded from the network.</footer>
</main>
</body>
</html>
`))
