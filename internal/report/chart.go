package report

import (
	"cmp"
	"fmt"
	"html"
	"math"
	"strconv"
	"strings"
	"time"
)

// A chart is one inline SVG line chart over the crawl's time axis (seconds since it started).
// Every chart of a report shares the same time axis, so charts stacked on the page line up.
type chart struct {
	width  int // SVG user units; 0 means chartW
	title  string
	unit   string  // shown after the title, e.g. "requests/s"
	xMax   float64 // seconds; the axis runs from 0
	series []series
	marks  []mark
	bands  []band
}

// series is one line. A NaN y breaks the line (no data there).
type series struct {
	name  string
	color string
	dash  bool // dashed (a limit rather than a measurement)
	fill  bool // shade the area under the line
	pts   []pt
}

type pt struct{ x, y float64 }

// mark is an event on the time axis, drawn as a small symbol in a rug along the bottom of the
// plot: row 0 (triangles) or row 1 (dots). Its title is the tooltip.
type mark struct {
	x     float64
	row   int
	color string
	name  string // legend entry
	title string
}

// band shades a stretch of time (a Retry-After pause).
type band struct {
	x0, x1 float64
	title  string
}

// Colours, shared by the legend text of the page.
const (
	colRate      = "#2563eb"
	colLimit     = "#64748b"
	colAccepted  = "#16a34a"
	colOverLimit = "#dc2626"
	colRetry     = "#f59e0b"
	colPause     = "#fca5a5"
	colP50       = "#0d9488"
	colP95       = "#7c3aed"
	colPages     = "#2563eb"
	colRequests  = "#94a3b8"
	colQueued    = "#4f46e5"
	colInFlight  = "#ea580c"
	colHosts     = "#16a34a"
)

// Geometry of every chart, in SVG user units (the SVG scales to its container's width).
const (
	chartW, chartH         = 560, 210
	padL, padR, padT, padB = 46, 10, 30, 26
	rugRow                 = 9 // height of one marker row
	plotX0, plotY0, plotY1 = padL, padT, chartH - padB
	plotH                  = plotY1 - plotY0
)

func (c *chart) w() int      { return cmp.Or(c.width, chartW) }
func (c *chart) plotX1() int { return c.w() - padR }
func (c *chart) plotW() int  { return c.plotX1() - plotX0 }

func (c *chart) x(s float64) float64 {
	if c.xMax <= 0 {
		return plotX0
	}
	return plotX0 + s/c.xMax*float64(c.plotW())
}

// svg renders the chart. Text is escaped; the result is safe to inline in HTML.
func (c *chart) svg() string {
	yMax := 0.0
	for _, s := range c.series {
		for _, p := range s.pts {
			if !math.IsNaN(p.y) && p.y > yMax {
				yMax = p.y
			}
		}
	}
	yTicks := niceTicks(yMax)
	yTop := yTicks[len(yTicks)-1]
	rows := 0
	for _, m := range c.marks {
		rows = max(rows, m.row+1)
	}
	// Lines live above the marker rug so marks never hide them.
	lineY0 := float64(plotY1 - rows*rugRow)
	y := func(v float64) float64 { return lineY0 - v/yTop*(lineY0-plotY0) }

	plotX1, plotW := c.plotX1(), c.plotW()
	legend := c.legend()
	widths := make([]float64, len(legend))
	for i, e := range legend {
		widths[i] = legendWidth(e.name)
	}
	titleEnd := float64(plotX0) + titleWidth(c.title, c.unit)
	xs, lines := layoutLegend(widths, titleEnd, plotX0, float64(plotX1))
	extra := 0 // the legend's lines below the title's push the plot down
	for _, l := range lines {
		extra = max(extra, l*legendLineH)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %d %d" xmlns="http://www.w3.org/2000/svg" role="img" aria-label="%s">`, c.w(), chartH+extra, esc(c.title))
	fmt.Fprintf(&b, `<text x="%d" y="16" class="ct">%s`, plotX0, esc(c.title))
	if c.unit != "" {
		fmt.Fprintf(&b, ` <tspan class="cu">%s</tspan>`, esc(c.unit))
	}
	b.WriteString(`</text>`)

	for i, e := range legend {
		sx, cy := xs[i], 12+lines[i]*legendLineH
		switch e.kind {
		case "line", "dash":
			dash := ""
			if e.kind == "dash" {
				dash = ` stroke-dasharray="4 3"`
			}
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s" stroke-width="2.2"%s/>`, sx, cy, sx+12, cy, e.color, dash)
		case "tri":
			fmt.Fprintf(&b, `<path d="%s" fill="%s"/>`, triangle(sx+6, float64(cy)), e.color)
		case "dot":
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%d" r="3" fill="%s"/>`, sx+6, cy, e.color)
		case "band":
			fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="12" height="10" fill="%s" fill-opacity="0.5"/>`, sx, cy-5, e.color)
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" class="lg">%s</text>`, sx+15, cy+4, esc(e.name))
	}
	if extra > 0 {
		fmt.Fprintf(&b, `<g transform="translate(0 %d)">`, extra)
	}

	// Pauses behind everything.
	for _, bd := range c.bands {
		x0, x1 := c.x(max(bd.x0, 0)), c.x(min(bd.x1, c.xMax))
		if x1 <= x0 {
			continue
		}
		fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s" fill-opacity="0.35"><title>%s</title></rect>`,
			x0, plotY0, x1-x0, plotH, colPause, esc(bd.title))
	}

	// Grid and axes.
	for _, t := range yTicks {
		yy := y(t)
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" class="grid"/>`, plotX0, yy, plotX1, yy)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" class="yl">%s</text>`, plotX0-5, yy+3.5, fmtTick(t, yTicks[1]))
	}
	for _, t := range timeTicks(c.xMax) {
		xx := c.x(t)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" class="grid"/>`, xx, plotY0, xx, plotY1)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" class="xl">%s</text>`, xx, plotY1+15, fmtClock(t, c.xMax >= 3600))
	}
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" class="frame"/>`, plotX0, plotY0, plotW, plotH)
	if rows > 0 {
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" class="rug"/>`, plotX0, lineY0, plotX1, lineY0)
	}

	// Lines.
	for _, s := range c.series {
		d := pathData(s.pts, c.x, y)
		if d == "" {
			continue
		}
		if s.fill {
			for _, run := range runs(s.pts) {
				var a strings.Builder
				fmt.Fprintf(&a, "M%.1f %.1f", c.x(run[0].x), lineY0)
				for _, p := range run {
					fmt.Fprintf(&a, "L%.1f %.1f", c.x(p.x), y(p.y))
				}
				fmt.Fprintf(&a, "L%.1f %.1fZ", c.x(run[len(run)-1].x), lineY0)
				fmt.Fprintf(&b, `<path d="%s" fill="%s" fill-opacity="0.13" stroke="none"/>`, a.String(), s.color)
			}
		}
		dash := ""
		if s.dash {
			dash = ` stroke-dasharray="5 4"`
		}
		fmt.Fprintf(&b, `<path d="%s" fill="none" stroke="%s" stroke-width="1.8" stroke-linejoin="round"%s><title>%s</title></path>`,
			d, s.color, dash, esc(s.name))
		if len(s.pts) == 1 || isolated(s.pts) {
			for i, p := range s.pts {
				if !math.IsNaN(p.y) && (i == 0 || math.IsNaN(s.pts[i-1].y)) && (i == len(s.pts)-1 || math.IsNaN(s.pts[i+1].y)) {
					fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="2" fill="%s"/>`, c.x(p.x), y(p.y), s.color)
				}
			}
		}
	}

	// Marker rug.
	for _, m := range c.marks {
		cy := float64(plotY1) - float64(m.row)*rugRow - rugRow/2
		if m.row == 0 {
			fmt.Fprintf(&b, `<path d="%s" fill="%s"><title>%s</title></path>`, triangle(c.x(m.x), cy), m.color, esc(m.title))
		} else {
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="2.8" fill="%s"><title>%s</title></circle>`, c.x(m.x), cy, m.color, esc(m.title))
		}
	}
	if extra > 0 {
		b.WriteString(`</g>`)
	}
	b.WriteString(`</svg>`)
	return b.String()
}

func triangle(cx, cy float64) string {
	return fmt.Sprintf("M%.1f %.1fL%.1f %.1fL%.1f %.1fZ", cx, cy-3.6, cx+3.8, cy+3.2, cx-3.8, cy+3.2)
}

// runs splits points at NaN breaks into unbroken runs.
func runs(pts []pt) [][]pt {
	var out [][]pt
	var cur []pt
	for _, p := range pts {
		if math.IsNaN(p.y) {
			if len(cur) > 0 {
				out = append(out, cur)
			}
			cur = nil
			continue
		}
		cur = append(cur, p)
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// isolated reports whether some run is a single point (drawn as a dot, as a path of one point
// shows nothing).
func isolated(pts []pt) bool {
	for _, r := range runs(pts) {
		if len(r) == 1 {
			return true
		}
	}
	return false
}

func pathData(pts []pt, x, y func(float64) float64) string {
	var b strings.Builder
	for _, r := range runs(pts) {
		for i, p := range r {
			op := 'L'
			if i == 0 {
				op = 'M'
			}
			fmt.Fprintf(&b, "%c%.1f %.1f", op, x(p.x), y(p.y))
		}
	}
	return b.String()
}

// niceTicks returns evenly spaced round values from 0 to at least max (four to seven of them).
func niceTicks(maxV float64) []float64 {
	if !(maxV > 0) || math.IsInf(maxV, 0) {
		return []float64{0, 1}
	}
	raw := maxV / 4
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	var t []float64
	for i := 0.0; ; i++ {
		v := i * step
		t = append(t, v)
		if v >= maxV-step*1e-9 {
			break
		}
	}
	return t
}

// timeTicks returns round times from 0 to xMax, at most about eight.
func timeTicks(xMax float64) []float64 {
	steps := []float64{1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 4 * 3600, 6 * 3600, 12 * 3600, 86400}
	step := steps[len(steps)-1]
	for _, s := range steps {
		if xMax/s <= 8 {
			step = s
			break
		}
	}
	for xMax/step > 8 {
		step *= 2
	}
	var t []float64
	for v := 0.0; v <= xMax+1e-9; v += step {
		t = append(t, v)
	}
	return t
}

// fmtClock formats seconds since the start as m:ss (0:05, 1:30), or as h:mm:ss when long (on
// an axis that reaches an hour).
func fmtClock(s float64, long bool) string {
	d := time.Duration(math.Round(s)) * time.Second
	h, m, sec := int(d.Hours()), int(d.Minutes())%60, int(d.Seconds())%60
	if long || h > 0 {
		return fmt.Sprintf("%d:%02d:%02d", h, m, sec)
	}
	return fmt.Sprintf("%d:%02d", m, sec)
}

// fmtTick formats an axis value with as many decimals as the step between ticks needs.
func fmtTick(v, step float64) string {
	d := 0
	for x := step; d < 9 && math.Abs(x-math.Round(x)) > 1e-6*math.Max(1, math.Abs(x)); x *= 10 {
		d++
	}
	return strconv.FormatFloat(v, 'f', d, 64)
}

func esc(s string) string { return html.EscapeString(s) }

// legendEntry is one entry of a chart's legend.
type legendEntry struct{ name, color, kind string }

// legend lists the chart's series, its kinds of marks and its pauses, in that order.
func (c *chart) legend() []legendEntry {
	var legend []legendEntry
	for _, s := range c.series {
		k := "line"
		if s.dash {
			k = "dash"
		}
		legend = append(legend, legendEntry{s.name, s.color, k})
	}
	seen := map[string]bool{}
	for _, m := range c.marks {
		if !seen[m.name] {
			seen[m.name] = true
			k := "tri"
			if m.row == 1 {
				k = "dot"
			}
			legend = append(legend, legendEntry{m.name, m.color, k})
		}
	}
	if len(c.bands) > 0 {
		legend = append(legend, legendEntry{"paused", colPause, "band"})
	}
	return legend
}

// legendLineH is the height of a legend line below the title's.
const legendLineH = 15

// legendWidth estimates the width of a legend entry: its symbol and its 11px text.
func legendWidth(name string) float64 { return 7*float64(len([]rune(name))) + 18 }

// titleWidth estimates the width of a chart's title (13px, bold) and unit (13px).
func titleWidth(title, unit string) float64 {
	w := 8 * float64(len([]rune(title)))
	if unit != "" {
		w += 7 * float64(len([]rune(unit))+1)
	}
	return w
}

// layoutLegend places legend entries of the given widths: on the title's line (0),
// right-aligned to x1, when they all fit right of titleEnd; otherwise on lines 1, 2 … below
// it, left to right from x0, a new line when one is full. It returns each entry's x and line.
func layoutLegend(widths []float64, titleEnd, x0, x1 float64) (xs []float64, lines []int) {
	const gap = 16 // between the title and the legend
	total := 0.0
	for _, w := range widths {
		total += w
	}
	xs, lines = make([]float64, len(widths)), make([]int, len(widths))
	if total <= x1-titleEnd-gap {
		x := x1 - total
		for i, w := range widths {
			xs[i] = x
			x += w
		}
		return xs, lines
	}
	x, line := x0, 1
	for i, w := range widths {
		if x+w > x1 && x > x0 {
			x, line = x0, line+1
		}
		xs[i], lines[i] = x, line
		x += w
	}
	return xs, lines
}
