package report

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/crawl-project/crawl/internal/crawler"
	"github.com/crawl-project/crawl/storage"
)

// manyHosts is a report's data for n contacted hosts, each sampled once with reqs(i) requests,
// host i having pages(i) pages, and notCrawled hosts only linked to.
func manyHosts(n, notCrawled int, pages, reqs func(i int) int) *Data {
	d := &Data{Dir: "/data/x", Series: map[string][]storage.Sample{},
		Status: crawler.Status{HostsNotCrawled: notCrawled}}
	for i := range n {
		h := fmt.Sprintf("h%05d.example", i)
		d.Status.Hosts = append(d.Status.Hosts, crawler.HostStatus{Host: h, Pages: pages(i)})
		d.Series[h] = []storage.Sample{{At: t0.Add(time.Second), Span: time.Second, Requests: reqs(i), Pages: pages(i)}}
	}
	d.Series[storage.CrawlWide] = []storage.Sample{{At: t0}, {At: t0.Add(time.Second), Span: time.Second}}
	return d
}

func TestHostsBusiestFirstAndCapped(t *testing.T) {
	same := func(int) int { return 1 }
	cases := []struct {
		name                   string
		d                      *Data
		first                  []string // the first rows, in order
		rows, moreRows, charts int
		moreCharts             int
		notes                  []string // in the page
		absent                 []string // not in the page
	}{
		{
			name:  "pages first, then requests",
			d:     manyHosts(4, 0, func(i int) int { return []int{1, 5, 1, 0}[i] }, func(i int) int { return []int{2, 9, 7, 3}[i] }),
			first: []string{"h00001.example", "h00002.example", "h00000.example", "h00003.example"},
			rows:  4, charts: 4,
			absent: []string{"linked to but not crawled", "not shown"},
		},
		{
			name:  "a docs site and the hosts it links to",
			d:     manyHosts(1, 170, same, same),
			first: []string{"h00000.example"}, rows: 1, charts: 1,
			notes: []string{"and 170 hosts linked to but not crawled.", "170 linked to, not crawled"},
		},
		{
			name:  "broad",
			d:     manyHosts(MaxTableRows+100, 3000, func(i int) int { return i % 7 }, func(i int) int { return i }),
			first: []string{"h00594.example", "h00587.example"}, // 6 pages; then most requests
			rows:  MaxTableRows, moreRows: 100, charts: MaxHostCharts, moreCharts: MaxTableRows + 100 - MaxHostCharts,
			notes: []string{"… and 100 more hosts crawled", "and 3000 hosts linked to but not crawled.",
				fmt.Sprintf("charts for %d more hosts are not shown", MaxTableRows+100-MaxHostCharts),
				fmt.Sprintf("Per host: the %d busiest", MaxHostCharts)},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := build(tc.d, t0)
			for i, h := range tc.first {
				if v.Rows[i].Label != h {
					t.Errorf("row %d is %s, want %s", i, v.Rows[i].Label, h)
				}
			}
			if len(v.Rows) != tc.rows || v.MoreRows != tc.moreRows || len(v.Hosts) != tc.charts || v.MoreHosts != tc.moreCharts {
				t.Errorf("%d rows (+%d), %d charted hosts (+%d); want %d (+%d), %d (+%d)",
					len(v.Rows), v.MoreRows, len(v.Hosts), v.MoreHosts, tc.rows, tc.moreRows, tc.charts, tc.moreCharts)
			}
			for i, hv := range v.Hosts { // the charts follow the table's order
				if hv.Label != v.Rows[i].Label {
					t.Errorf("chart %d is %s, row %d is %s", i, hv.Label, i, v.Rows[i].Label)
					break
				}
			}
			var b bytes.Buffer
			if err := Write(&b, tc.d, t0); err != nil {
				t.Fatal(err)
			}
			parse(t, b.Bytes())
			for _, s := range tc.notes {
				if !strings.Contains(b.String(), s) {
					t.Errorf("page lacks %q", s)
				}
			}
			for _, s := range tc.absent {
				if strings.Contains(b.String(), s) {
					t.Errorf("page has %q", s)
				}
			}
		})
	}
}
