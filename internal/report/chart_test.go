package report

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/crawl-project/crawl/storage"
)

func TestNiceTicks(t *testing.T) {
	cases := []struct {
		max  float64
		want string
	}{
		{0, "0 1"},
		{math.NaN(), "0 1"},
		{1, "0.00 0.25 0.50 0.75 1.00"},
		{7, "0 2 4 6 8"},
		{29.6, "0 10 20 30"},
		{100, "0 25 50 75 100"},
		{156.8, "0 50 100 150 200"},
		{0.004, "0.000 0.001 0.002 0.003 0.004"},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprint(tc.max), func(t *testing.T) {
			var got []string
			for _, v := range niceTicks(tc.max) {
				got = append(got, fmtTick(v, niceTicks(tc.max)[1]))
			}
			if strings.Join(got, " ") != tc.want {
				t.Errorf("niceTicks(%v) = %v, want %s", tc.max, got, tc.want)
			}
		})
	}
}

func TestTimeTicks(t *testing.T) {
	cases := []struct {
		max  float64
		want string
	}{
		{1, "0:00 0:01"},
		{1800, "0:00 5:00 10:00 15:00 20:00 25:00 30:00"},
		{12, "0:00 0:02 0:04 0:06 0:08 0:10 0:12"},
		{95, "0:00 0:15 0:30 0:45 1:00 1:15 1:30"},
		{3 * 3600, "0:00:00 0:30:00 1:00:00 1:30:00 2:00:00 2:30:00 3:00:00"},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprint(tc.max), func(t *testing.T) {
			var got []string
			for _, v := range timeTicks(tc.max) {
				got = append(got, fmtClock(v, tc.max >= 3600))
			}
			if strings.Join(got, " ") != tc.want {
				t.Errorf("timeTicks(%v) = %v, want %s", tc.max, got, tc.want)
			}
		})
	}
}

// TestLineBreaks: a line is broken where a host was idle for a while and where a new run of
// the crawl starts, and samples without a value are skipped.
func TestLineBreaks(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := func(sec float64, span time.Duration, reqs int) storage.Sample {
		return storage.Sample{At: t0.Add(time.Duration(sec * float64(time.Second))), Span: span, Requests: reqs}
	}
	ss := []storage.Sample{
		s(1, time.Second, 1), s(2, time.Second, 0), s(3, time.Second, 2), // joined (the empty one skipped)
		s(10, time.Second, 1),              // idle for 7 s: break
		s(50, 0, 0), s(51, time.Second, 1), // a new run: break
	}
	b := builder{t0: t0, xMax: 51}
	pts := b.line(ss, func(s storage.Sample) (float64, bool) { return float64(s.Requests), s.Requests > 0 })
	var got []string
	for _, p := range pts {
		if math.IsNaN(p.y) {
			got = append(got, "|")
		} else {
			got = append(got, fmt.Sprint(p.x))
		}
	}
	if want := "1 3 | 10 | 51"; strings.Join(got, " ") != want {
		t.Errorf("points %v, want %s", got, want)
	}
	if d := pathData(pts, func(v float64) float64 { return v }, func(v float64) float64 { return v }); strings.Count(d, "M") != 3 {
		t.Errorf("path %q: want three separate runs", d)
	}
}

// TestLegendKeepsClearOfTitle: a legend too long for the title's line goes below it, and the
// plot moves down to make room; a short one stays on the title's line, right-aligned.
func TestLegendKeepsClearOfTitle(t *testing.T) {
	busy := &chart{title: "Rate", unit: "requests/s", xMax: 10,
		series: []series{{name: "accepted"}, {name: "paced at (Crawl-delay)", dash: true}, {name: "rate chosen"}},
		marks:  []mark{{x: 1, row: 0, name: "429/503"}, {x: 2, row: 1, name: "retries"}},
		bands:  []band{{x0: 3, x1: 4}}}
	quiet := &chart{title: "Rate", unit: "requests/s", xMax: 10, series: []series{{name: "accepted"}, {name: "rate chosen"}}}
	titleEnd := float64(plotX0) + titleWidth("Rate", "requests/s")
	legendAt := regexp.MustCompile(`<text x="([0-9.]+)" y="([0-9]+)" class="lg">([^<]*)</text>`)
	for _, tc := range []struct {
		name  string
		c     *chart
		below bool
	}{{"busy", busy, true}, {"quiet", quiet, false}} {
		svg := tc.c.svg()
		got := legendAt.FindAllStringSubmatch(svg, -1)
		if len(got) != len(tc.c.legend()) {
			t.Fatalf("%s: %d legend texts, want %d:\n%s", tc.name, len(got), len(tc.c.legend()), svg)
		}
		for _, m := range got {
			x, _ := strconv.ParseFloat(m[1], 64)
			y, _ := strconv.Atoi(m[2])
			if y == 16 && x-15 < titleEnd {
				t.Errorf("%s: legend %q at x %.0f on the title's line, over the title (ends at %.0f)", tc.name, m[3], x, titleEnd)
			}
			if below := y > 16; below != tc.below {
				t.Errorf("%s: legend %q at y %d; want below the title: %v", tc.name, m[3], y, tc.below)
			}
			if x > float64(tc.c.plotX1()) {
				t.Errorf("%s: legend %q starts at x %.0f, past the chart's right edge", tc.name, m[3], x)
			}
		}
		if tc.below != strings.Contains(svg, `<g transform="translate(0 `) {
			t.Errorf("%s: the plot moved down: %v, want %v", tc.name, !tc.below, tc.below)
		}
	}
}
