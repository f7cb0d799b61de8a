package robots

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

// hostileShape builds a robots.txt of n lines of one pathological kind: what a hostile host
// serves to make a parser that is quadratic in some count of lines spend seconds on one file.
type hostileShape struct {
	name  string
	line  func(i int) string // line i (0-based), after head
	head  string
	agent string // asked by Test after parsing: an agent the file's groups apply to
	path  string // a path no rule matches, so that every rule is tried and every group named
}

// letters spells i in base 26 with a-z, so that each line names a distinct product token
// ("a1", "a2" all have the product token "a").
func letters(i int) string {
	var b []byte
	for {
		b = append(b, byte('a'+i%26))
		i /= 26
		if i == 0 {
			return string(b)
		}
	}
}

var hostileShapes = []hostileShape{
	// The report's file: one group of "User-agent: aN" lines (one product token, "a", and a
	// group name that grows by one line each time).
	{name: "user-agent aN", line: func(i int) string { return fmt.Sprintf("User-agent: a%d\n", i) },
		agent: "a", path: "/x"},
	// One group naming a distinct product token per line.
	{name: "user-agent distinct", line: func(i int) string { return "User-agent: b" + letters(i) + "\n" },
		agent: "ba", path: "/x"},
	{name: "sitemaps", line: func(i int) string { return fmt.Sprintf("Sitemap: https://example.com/s%d.xml\n", i) },
		agent: "crawl", path: "/x"},
	{name: "rules", head: "User-agent: *\n", line: func(i int) string { return fmt.Sprintf("Disallow: /p%d\n", i) },
		agent: "crawl", path: "/x"},
	{name: "wildcard rules", head: "User-agent: *\n",
		line:  func(i int) string { return fmt.Sprintf("Disallow: /*%s*q%d$\n", letters(i), i) },
		agent: "crawl", path: "/" + strings.Repeat("abcdefghijklmnopqrstuvwxyz", 8)},
	// Many "*" groups, each also naming a distinct agent: a verdict that matched no rule
	// names every user-agent line of every group.
	{name: "star groups", line: func(i int) string {
		return fmt.Sprintf("User-agent: *\nUser-agent: c%s\nDisallow: /p%d\n", letters(i), i)
	}, agent: "crawl", path: "/x"},
	// Many groups naming the crawler, each with many other agents.
	{name: "merged groups", line: func(i int) string {
		if i%100 == 0 {
			return fmt.Sprintf("Disallow: /p%d\nUser-agent: crawl\n", i)
		}
		return "User-agent: d" + letters(i) + "\n"
	}, agent: "crawl", path: "/x"},
}

// body returns head and n lines of s.
func (s hostileShape) body(n int) []byte {
	var b strings.Builder
	b.WriteString(s.head)
	for i := range n {
		b.WriteString(s.line(i))
	}
	return []byte(b.String())
}

// fit returns the largest n whose body fits in MaxSize.
func (s hostileShape) fit() int {
	size, n := len(s.head), 0
	for size+len(s.line(n)) <= MaxSize {
		size += len(s.line(n))
		n++
	}
	return n
}

// parseAndAsk is the work a crawler does with a fetched robots.txt: parse it, then ask about a
// URL and the crawl delay.
func parseAndAsk(s hostileShape, body []byte) {
	r := Parse(body)
	r.Test(s.agent, s.path)
	r.Test(s.agent, s.path+"/y")
	r.CrawlDelay(s.agent)
	r.Sitemaps()
}

// minTime returns the least CPU time the calling thread spent in one of runs calls of f: the
// run least disturbed by other work on the machine (cache misses, interrupts), which is the
// best estimate of f's own cost. CPU time, not the wall clock: a run long enough to span many
// scheduler slices would otherwise count the waits for a core that a short run never meets.
// The collector is off while f runs: a small heap is not collected at all and a large one is,
// which would add to the larger input's time a cost that is not f's.
func minTime(runs int, f func()) time.Duration {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	best := time.Duration(1<<63 - 1)
	for range runs {
		runtime.GC()
		start := threadCPU()
		f()
		best = min(best, threadCPU()-start)
	}
	return best
}

// allocated returns the bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestParseLinear checks that parsing (and asking about one URL) costs time and memory linear
// in the number of lines, for each hostile shape: a file of 16n lines may cost at most 96 times
// what a file of n lines costs (linear work gives 16, and up to 40 with the larger input's
// cache misses under the race detector; a step quadratic in the lines gives 256). Time is the thread's CPU time in the
// fastest of several interleaved runs (minTime), measured again up to three times before
// failing, so that a loaded machine cannot fail a linear parser. Bytes allocated are
// deterministic.
func TestParseLinear(t *testing.T) {
	const grow, bound = 16, 96
	for _, s := range hostileShapes {
		t.Run(s.name, func(t *testing.T) {
			large := s.fit() / 2 // half of MaxSize: a quadratic parser fails in seconds, not minutes
			n := large / grow
			small, big := s.body(n), s.body(large)
			as, ab := allocated(func() { parseAndAsk(s, small) }), allocated(func() { parseAndAsk(s, big) })
			if ratio := float64(ab) / float64(as); ratio > bound {
				t.Errorf("%d lines allocate %d bytes, %d lines %d: %.1f times for %d times the lines",
					n, as, large, ab, ratio, grow)
			}
			var ts, tb time.Duration
			for range 3 {
				ts, tb = time.Duration(1<<63-1), time.Duration(1<<63-1)
				for range 3 { // interleaved, so that a busy spell on the machine hits both sizes
					ts = min(ts, minTime(3, func() { parseAndAsk(s, small) }))
					tb = min(tb, minTime(1, func() { parseAndAsk(s, big) }))
				}
				if float64(tb) <= bound*float64(ts) {
					t.Logf("%d lines: %v, %d lines: %v (%.1f times); bytes %.1f times",
						n, ts, large, tb, float64(tb)/float64(ts), float64(ab)/float64(as))
					return
				}
			}
			t.Errorf("%d lines take %v, %d lines (%d bytes) %v: %.1f times for %d times the lines",
				n, ts, large, len(big), tb, float64(tb)/float64(ts), grow)
		})
	}
}

// TestMatchLinear checks that matching a path against a rule with many wildcards is linear in
// the lengths of both: each segment is found once, left to right, without backtracking.
func TestMatchLinear(t *testing.T) {
	build := func(k int) (*rule, string) {
		// "/*ab*ab*…*ab*c$" against "/abab…ab" (no "c"): every segment is found, the last
		// is not, and an anchored, backtracking matcher would retry each earlier segment.
		value := "/" + strings.Repeat("*ab", k) + "*c$"
		return newRule(false, value, "Disallow: "+value, 1), "/" + strings.Repeat("ab", 4*k)
	}
	const k = 2000
	rs, ps := build(k)
	rb, pb := build(4 * k)
	if rs.match(ps) || rb.match(pb) {
		t.Fatal("rule matched a path without its last segment")
	}
	var ts, tb time.Duration
	for try := 0; try < 3; try++ {
		ts = minTime(5, func() {
			for range 100 {
				rs.match(ps)
			}
		})
		tb = minTime(5, func() {
			for range 100 {
				rb.match(pb)
			}
		})
		if float64(tb) <= 8*float64(ts) {
			return
		}
	}
	t.Errorf("a %d-segment rule on a %d-byte path takes %v, 4 times both %v: %.1f times",
		k, len(ps), ts/100, tb/100, float64(tb)/float64(ts))
}

// BenchmarkParseHostile parses each hostile shape at MaxSize and asks about one URL:
// go test ./robots -run '^$' -bench ParseHostile -benchtime 3x
// Besides ns/op (the wall clock), cpu-ns/op is the benchmark thread's CPU time, which a loaded
// machine does not inflate (see cpuLoop).
func BenchmarkParseHostile(b *testing.B) {
	for _, s := range hostileShapes {
		body := s.body(s.fit())
		b.Run(s.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			cpuLoop(b, func() { parseAndAsk(s, body) })
		})
	}
}

// cpuLoop runs f b.N times and reports the thread's CPU time per call as cpu-ns/op.
func cpuLoop(b *testing.B, f func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start := threadCPU()
	n := 0
	for b.Loop() {
		f()
		n++
	}
	b.ReportMetric(float64(threadCPU()-start)/float64(n), "cpu-ns/op")
}

// BenchmarkTestHostile asks about one URL of urlnorm's longest (2,048 bytes) against files
// of MaxSize whose rules all apply and none matches: the most a verdict costs.
// go test ./robots -run '^$' -bench TestHostile
func BenchmarkTestHostile(b *testing.B) {
	long := "/" + strings.Repeat("a", 2047)
	for _, s := range []hostileShape{
		{name: "prefix rules", head: "User-agent: *\n", line: func(i int) string { return fmt.Sprintf("Disallow: /%s%d\n", strings.Repeat("a", 20), i) }},
		{name: "wildcard rules", head: "User-agent: *\n", line: func(i int) string { return fmt.Sprintf("Disallow: /*a%d*b\n", i) }},
		{name: "many wildcards", head: "User-agent: *\n", line: func(i int) string { return fmt.Sprintf("Disallow: /*a*a*a*a*a*a*a*a*%d$\n", i) }},
		{name: "one long pattern", head: "User-agent: *\n", line: func(i int) string { return "*a" }},
		{name: "star groups", line: func(i int) string { return fmt.Sprintf("User-agent: *\nDisallow: /*a%d\n", i) }},
	} {
		r := Parse(s.body(s.fit()))
		b.Run(s.name, func(b *testing.B) {
			cpuLoop(b, func() {
				if !r.Test("crawl", long).Allowed {
					b.Fatal("disallowed")
				}
			})
		})
	}
}
