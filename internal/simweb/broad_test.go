package simweb

import (
	"context"
	"errors"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// startBroad starts specs with VirtualHosts; its client dials the Web's one address whatever
// the host name, so no resolver is needed.
func startBroad(t *testing.T, specs []HostSpec, opts *Options) (*Web, *http.Client) {
	t.Helper()
	o := Options{}
	if opts != nil {
		o = *opts
	}
	o.VirtualHosts = true
	w, err := Start(specs, &o)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	var d net.Dialer
	tr := &http.Transport{
		MaxIdleConnsPerHost: 4,
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, w.Addr())
		},
	}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		w.Close()
	})
	return w, &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func TestBroadNames(t *testing.T) {
	tests := []struct {
		hosts      int
		first, end string
	}{
		{1, "h00000.broad.test", "h00000.broad.test"},
		{1000, "h00000.broad.test", "h00999.broad.test"},
		{100_001, "h000000.broad.test", "h100000.broad.test"},
	}
	for _, tc := range tests {
		specs := Broad(tc.hosts, 2, 5, 1)
		if len(specs) != tc.hosts || specs[0].Name != tc.first || specs[len(specs)-1].Name != tc.end {
			t.Errorf("Broad(%d): %d hosts %s … %s, want %s … %s", tc.hosts, len(specs),
				specs[0].Name, specs[len(specs)-1].Name, tc.first, tc.end)
		}
		if err := validate(specs, true); err != nil {
			t.Errorf("Broad(%d): %v", tc.hosts, err)
		}
	}
	specs := Broad(50, 3, 5, 1)
	for i, s := range specs {
		next := specs[(i+1)%len(specs)].Name
		if s.Limit != 5 || s.Burst != 1 || s.Reply != Reply429Seconds || s.Pages != 3 {
			t.Fatalf("%s: %+v", s.Name, s)
		}
		if len(s.CrossLinks) != 1+broadLinks || s.CrossLinks[0] != next {
			t.Errorf("%s links to %v, want the next host %s and %d others", s.Name, s.CrossLinks, next, broadLinks)
		}
	}
	if !slices.EqualFunc(specs, Broad(50, 3, 5, 1), func(a, b HostSpec) bool {
		return slices.Equal(a.CrossLinks, b.CrossLinks)
	}) {
		t.Error("one seed drew two link graphs")
	}
}

func TestVirtualHostsValidation(t *testing.T) {
	many := Broad(251, 1, 0, 1)
	if _, err := Start(many, nil); !errors.Is(err, ErrBadSpec) {
		t.Errorf("251 hosts, one listener each: %v, want ErrBadSpec", err)
	}
	for _, name := range []string{"A.test", "a_b.test", "-a.test", "a..test", "127.0.0.1", "a.test.", ""} {
		if _, err := Start([]HostSpec{{Name: name, Pages: 1}}, &Options{VirtualHosts: true}); !errors.Is(err, ErrBadSpec) {
			t.Errorf("name %q with VirtualHosts: %v, want ErrBadSpec", name, err)
		}
	}
}

// TestBroadWalk walks a broad web from one host's root: links alone reach every page of every
// host, all served by one listener, and a clean walk scores zero.
func TestBroadWalk(t *testing.T) {
	specs := Broad(120, 4, 5, 3)
	clk := newFakeClock(t0, time.Second) // one request per second: no bucket is ever empty
	w, c := startBroad(t, specs, &Options{Seed: 3, Clock: clk.Now})
	res := naiveBFS(t, w, c, w.Seeds()[:1])
	exp := w.Expected()
	stats := w.Stats()
	port := strings.TrimPrefix(w.Addr(), "127.0.0.1:")
	for i, name := range w.Names() {
		if got, want := w.Seeds()[i], "http://"+name+":"+port+"/"; got != want {
			t.Errorf("seed %q, want %q", got, want)
		}
		if len(exp[name]) != 4 || !slices.Equal(res.stored[name], exp[name]) {
			t.Errorf("host %s: walk stored %v, Expected %v", name, res.stored[name], exp[name])
		}
		if st := stats[name]; st.OK != 5 || st.OverLimit != 0 || st.Duplicates != 0 || st.BeforeRobots != 0 {
			t.Errorf("host %s: %+v, want 4 pages and robots.txt, nothing else", name, st)
		}
	}
}

// TestBroadLimitsPerHost: each name has its own bucket and Retry-After window, though one
// listener serves them all; a request for a name the Web does not serve is answered 421.
func TestBroadLimitsPerHost(t *testing.T) {
	clk := newFakeClock(t0, 0)
	w, c := startBroad(t, Broad(3, 2, 5, 1), &Options{Clock: clk.Now})
	a, b := w.URL("h00000.broad.test"), w.URL("h00001.broad.test")
	for i, tc := range []struct {
		url        string
		status     int
		retryAfter string
	}{
		{a, 200, ""}, {a, 429, "1"}, {a + "p1", 429, "1"}, {b, 200, ""}, {b + "p1", 429, "1"},
	} {
		r := get(t, c, tc.url)
		if r.status != tc.status || r.header.Get("Retry-After") != tc.retryAfter {
			t.Errorf("request %d (%s): %d Retry-After %q, want %d %q", i+1, tc.url, r.status,
				r.header.Get("Retry-After"), tc.status, tc.retryAfter)
		}
	}
	clk.Advance(time.Second)
	if r := get(t, c, a+"p1"); r.status != 200 {
		t.Errorf("after the announced second: %d, want 200", r.status)
	}
	stats := w.Stats()
	if st := stats["h00000.broad.test"]; st.Requests != 4 || st.OverLimit != 2 || st.InRetryAfter != 1 {
		t.Errorf("host 0: Requests/OverLimit/InRetryAfter %d/%d/%d, want 4/2/1", st.Requests, st.OverLimit, st.InRetryAfter)
	}
	if st := stats["h00001.broad.test"]; st.Requests != 2 || st.OverLimit != 1 || st.InRetryAfter != 0 {
		t.Errorf("host 1: Requests/OverLimit/InRetryAfter %d/%d/%d, want 2/1/0", st.Requests, st.OverLimit, st.InRetryAfter)
	}
	if r := get(t, c, "http://elsewhere.test:"+strings.TrimPrefix(w.Addr(), "127.0.0.1:")+"/"); r.status != http.StatusMisdirectedRequest {
		t.Errorf("unknown host: %d, want 421", r.status)
	}
	total := 0
	for _, st := range w.Stats() {
		total += st.Requests
	}
	if total != 6 {
		t.Errorf("%d requests counted, want 6 (the 421 counts nowhere)", total)
	}
	clk.Advance(2 * time.Second)
	get(t, c, b+"p1")
	if first, per := w.Arrivals(); !first.Equal(t0) || !slices.Equal(per, []int{5, 1, 0, 1}) {
		t.Errorf("Arrivals = %v, %v; want %v, [5 1 0 1]", first, per, t0)
	}
	w.Reset()
	if first, per := w.Arrivals(); !first.IsZero() || len(per) != 0 {
		t.Errorf("Arrivals after Reset = %v, %v; want none", first, per)
	}
}

// TestBroadManyHosts starts 20,000 hosts on one listener (more than a process may have open
// files with a listener each).
func TestBroadManyHosts(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("20,000 hosts: run without -race and -short")
	}
	w, c := startBroad(t, Broad(20_000, 1, 5, 1), nil)
	for _, i := range []int{0, 12_345, 19_999} {
		if r := get(t, c, w.Seeds()[i]); r.status != 200 {
			t.Errorf("GET %s: %d", w.Seeds()[i], r.status)
		}
	}
}

// TestLazyPagesMatchEager: a VirtualHosts web renders each page per request, and serves what the
// same web rendered once at Start would have served.
func TestLazyPagesMatchEager(t *testing.T) {
	specs := Broad(20, 6, 0, 1)
	w, c := startBroad(t, specs, &Options{Seed: 9})
	sites := buildSites(specs, 9, false)
	render(sites, specs, w.bases)
	for hi, name := range w.Names() {
		for _, p := range sites[hi].pages {
			u := w.URL(name) + strings.TrimPrefix(p.path, "/")
			for range 2 {
				if r := get(t, c, u); r.status != 200 || r.body != string(p.body) {
					t.Fatalf("GET %s: %d, body differs from the eager rendering: %t", u, r.status, r.body != string(p.body))
				}
			}
		}
	}
}
