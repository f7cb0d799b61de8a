package simweb

import (
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/temoto/robotstxt"
)

func TestStartRejectsBadSpecs(t *testing.T) {
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	tests := []struct {
		name  string
		specs []HostSpec
	}{
		{"no hosts", nil},
		{"empty name", []HostSpec{{Pages: 1}}},
		{"duplicate name", []HostSpec{{Name: "a", Pages: 1}, {Name: "a", Pages: 1}}},
		{"no pages", []HostSpec{{Name: "a"}}},
		{"negative limit", []HostSpec{{Name: "a", Pages: 1, Limit: -1}}},
		{"negative burst", []HostSpec{{Name: "a", Pages: 1, Burst: -1}}},
		{"unknown reply", []HostSpec{{Name: "a", Pages: 1, Reply: 9}}},
		{"negative workers", []HostSpec{{Name: "a", Pages: 1, Workers: -1}}},
		{"negative service", []HostSpec{{Name: "a", Pages: 1, Service: -1}}},
		{"negative ban", []HostSpec{{Name: "a", Pages: 1, BanAfter: -1}}},
		{"drop without limit", []HostSpec{{Name: "a", Pages: 1, LimitDrop: &LimitChange{Factor: 0.5}}}},
		{"drop factor 0", []HostSpec{{Name: "a", Pages: 1, Limit: 1, LimitDrop: &LimitChange{}}}},
		{"robots 301", []HostSpec{{Name: "a", Pages: 1, RobotsStatus: 301}}},
		{"relative disallow", []HostSpec{{Name: "a", Pages: 1, Disallow: []string{"private"}}}},
		{"wildcard disallow", []HostSpec{{Name: "a", Pages: 1, Disallow: []string{"/*.pdf"}}}},
		{"unknown cross link", []HostSpec{{Name: "a", Pages: 1, CrossLinks: []string{"b"}}}},
		{"self cross link", []HostSpec{{Name: "a", Pages: 1, CrossLinks: []string{"a"}}}},
		{"extra robots", []HostSpec{{Name: "a", Pages: 1, Extra: map[string]http.Handler{"/robots.txt": ok}}}},
		{"extra on page", []HostSpec{{Name: "a", Pages: 3, Extra: map[string]http.Handler{"/p2": ok}}}},
		{"extra nil", []HostSpec{{Name: "a", Pages: 1, Extra: map[string]http.Handler{"/x": nil}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w, err := Start(tc.specs, nil)
			if !errors.Is(err, ErrBadSpec) {
				if w != nil {
					w.Close()
				}
				t.Fatalf("Start = %v, want ErrBadSpec", err)
			}
		})
	}
}

func TestRobotsTxt(t *testing.T) {
	specs := []HostSpec{
		{Name: "rules", Pages: 5, Disallow: []string{"/private/", "/p3"}},
		{Name: "none", Pages: 5},
		{Name: "gone", Pages: 5, RobotsStatus: 404},
		{Name: "down", Pages: 5, RobotsStatus: 503},
	}
	w, c := startWeb(t, specs, nil)
	tests := []struct {
		host     string
		status   int
		allow    []string
		disallow []string
		expected int
	}{
		{"rules", 200, []string{"/", "/p1", "/p2"}, []string{"/private/x1", "/p3", "/p30"}, 4},
		{"none", 200, []string{"/", "/p4"}, nil, 5},
		{"gone", 404, []string{"/", "/p4"}, nil, 5},
		{"down", 503, nil, []string{"/", "/p1"}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.host, func(t *testing.T) {
			r := get(t, c, w.URL(tc.host)+"robots.txt")
			if r.status != tc.status {
				t.Fatalf("status %d, want %d", r.status, tc.status)
			}
			if tc.status == 200 && !strings.Contains(r.body, "User-agent: *\n") {
				t.Errorf("no User-agent: * group:\n%s", r.body)
			}
			data, err := robotstxt.FromStatusAndString(r.status, r.body)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range tc.allow {
				if !data.TestAgent(p, "anybot") {
					t.Errorf("%s disallowed, want allowed", p)
				}
			}
			for _, p := range tc.disallow {
				if data.TestAgent(p, "anybot") {
					t.Errorf("%s allowed, want disallowed", p)
				}
			}
			if n := len(w.Expected()[tc.host]); n != tc.expected {
				t.Errorf("Expected has %d URLs, want %d", n, tc.expected)
			}
		})
	}
	get(t, c, w.URL("down")+"p1")
	if st := w.Stats()["down"]; st.RobotsViolations != 1 || st.BeforeRobots != 0 {
		t.Errorf("page fetch after a 503 robots.txt: %+v, want one violation", st)
	}
	if st := w.Stats()["rules"]; st.RobotsRequests != 1 || st.PageRequests != 0 || st.OK != 1 {
		t.Errorf("robots-only stats: %+v", st)
	}
}

func TestDeterministicContent(t *testing.T) {
	bodies := func(seed int64) map[string]string {
		clk := newFakeClock(t0, time.Hour) // host b is rate limited; never let it refuse
		w, c := startWeb(t, Small(), &Options{Seed: seed, Clock: clk.Now})
		out := map[string]string{}
		for _, name := range w.Names() {
			for _, u := range w.Expected()[name] {
				r := get(t, c, u)
				if r.status != http.StatusOK {
					t.Fatalf("GET %s: %d", u, r.status)
				}
				body := r.body
				for _, n := range w.Names() { // ports differ from run to run
					body = strings.ReplaceAll(body, w.URL(n), "HOST-"+n+"/")
				}
				out[strings.TrimPrefix(u, strings.TrimSuffix(w.URL(name), "/"))+"@"+name] = body
			}
		}
		return out
	}
	a, b, other := bodies(3), bodies(3), bodies(4)
	if len(a) == 0 || len(a) != len(b) {
		t.Fatalf("%d vs %d pages", len(a), len(b))
	}
	differs := false
	for k, v := range a {
		if b[k] != v {
			t.Errorf("%s differs between runs with one seed", k)
		}
		if other[k] != v {
			differs = true
		}
	}
	if !differs {
		t.Error("seed 4 produced the same web as seed 3")
	}
}

func TestExtraAndNotFound(t *testing.T) {
	extra := map[string]http.Handler{
		"/made": http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusCreated)
			io.WriteString(w, "made")
		}),
		"/boom": http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "boom", http.StatusInternalServerError)
		}),
	}
	w, c := startWeb(t, []HostSpec{{Name: "h", Pages: 2, Extra: extra}}, nil)
	tests := []struct {
		path   string
		status int
	}{
		{"made", 201}, {"boom", 500}, {"p1", 200}, {"p2", 404}, {"nope/deeper", 404},
	}
	for _, tc := range tests {
		if r := get(t, c, w.URL("h")+tc.path); r.status != tc.status {
			t.Errorf("%s: status %d, want %d", tc.path, r.status, tc.status)
		}
	}
	resp, err := c.Post(w.URL("h")+"p1", "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: status %d, want 405", resp.StatusCode)
	}
	st := w.Stats()["h"]
	if st.OK != 2 || st.NotFound != 2 || st.Requests != 6 || len(st.Fetched) != 1 {
		t.Errorf("stats %+v, want OK 2, NotFound 2, Requests 6, one page fetched", st)
	}
}

func TestLoopbackIPs(t *testing.T) {
	w, c := startWeb(t, Small(), &Options{LoopbackIPs: true})
	hosts := map[string]bool{}
	for _, s := range w.Seeds() {
		u, err := url.Parse(s)
		if err != nil || !strings.HasPrefix(u.Hostname(), "127.") {
			t.Fatalf("seed %q not on loopback", s)
		}
		hosts[u.Host] = true
		if r := get(t, c, s); r.status != 200 {
			t.Errorf("GET %s: %d", s, r.status)
		}
	}
	if len(hosts) != 3 {
		t.Errorf("seeds %v not distinct", w.Seeds())
	}
	t.Logf("seeds: %v", w.Seeds())
}

// TestCloseAbortsServiceTime closes the Web while a request holds a worker for a minute.
func TestCloseAbortsServiceTime(t *testing.T) {
	w, err := Start([]HostSpec{{Name: "h", Pages: 1, Workers: 1, Service: time.Minute}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	errc := make(chan error, 1)
	go func() {
		resp, err := (&http.Client{Transport: tr}).Get(w.URL("h"))
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	for w.Stats()["h"].PeakInFlight == 0 {
		time.Sleep(time.Millisecond) // the test waits for the server; no decision code involved
	}
	start := time.Now()
	w.Close()
	w.Close() // idempotent
	if err := <-errc; err == nil {
		t.Error("request held for a minute succeeded after Close")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Close took %v", d)
	}
}

func TestURLAndNames(t *testing.T) {
	w, _ := startWeb(t, Small(), nil)
	names := w.Names()
	if strings.Join(names, ",") != "a,b,c" {
		t.Errorf("Names = %v", names)
	}
	for i, n := range names {
		if w.URL(n) != w.Seeds()[i] || !strings.HasSuffix(w.URL(n), "/") {
			t.Errorf("URL(%s) = %q, seed %q", n, w.URL(n), w.Seeds()[i])
		}
		if exp := w.Expected()[n]; len(exp) == 0 || exp[0] != w.URL(n) {
			t.Errorf("Expected[%s] should start with the root: %v", n, exp)
		}
	}
	if w.URL("zz") != "" {
		t.Error("URL of an unknown host should be empty")
	}
	e := w.Expected()
	e["a"][0] = "mutated"
	if w.Expected()["a"][0] == "mutated" {
		t.Error("Expected returned shared state")
	}
}

func TestFlaky(t *testing.T) {
	w, c := startWeb(t, []HostSpec{{Name: "h", Pages: 2, Flaky: 0.3}}, &Options{Seed: 7})
	bad := 0
	for i := 0; i < 200; i++ {
		switch r := get(t, c, w.URL("h")+"p1"); r.status {
		case http.StatusBadGateway:
			bad++
		case http.StatusOK:
		default:
			t.Fatalf("status %d, want 200 or 502", r.status)
		}
	}
	if r := get(t, c, w.URL("h")+"robots.txt"); r.status != http.StatusOK {
		t.Errorf("robots.txt: status %d; Flaky answers pages only", r.status)
	}
	st := w.Stats()["h"]
	if bad < 40 || bad > 80 || st.Flaky != bad || st.OK != 201-bad {
		t.Errorf("%d of 200 answered 502 (Stats: Flaky %d, OK %d); want about 60, counted", bad, st.Flaky, st.OK)
	}
	if _, err := Start([]HostSpec{{Name: "h", Pages: 1, Flaky: 1}}, nil); !errors.Is(err, ErrBadSpec) {
		t.Errorf("Flaky 1: %v, want ErrBadSpec", err)
	}
	if _, err := Start([]HostSpec{{Name: "h", Pages: 1, Flaky: 0.1, FlakyStatus: 429}}, nil); !errors.Is(err, ErrBadSpec) {
		t.Errorf("FlakyStatus 429: %v, want ErrBadSpec", err)
	}
	w, c = startWeb(t, []HostSpec{{Name: "h", Pages: 2, Flaky: 0.5, FlakyStatus: http.StatusServiceUnavailable}}, &Options{Seed: 7})
	bad = 0
	for i := 0; i < 40; i++ {
		r := get(t, c, w.URL("h")+"p1")
		if r.status == http.StatusServiceUnavailable {
			bad++
			if ra := r.header.Get("Retry-After"); ra != "" {
				t.Errorf("a flaky 503 carries Retry-After %q", ra)
			}
		} else if r.status != http.StatusOK {
			t.Fatalf("status %d, want 200 or 503", r.status)
		}
	}
	if bad == 0 || bad == 40 {
		t.Errorf("%d of 40 answered 503 at Flaky 0.5", bad)
	}
}

func TestTextSize(t *testing.T) {
	for _, virtual := range []bool{false, true} {
		specs := []HostSpec{{Name: "h.test", Pages: 20, TextSize: 12000}}
		w, c := startWeb(t, specs, nil)
		if virtual {
			w, c = startBroad(t, specs, nil) // pages rendered per request
		}
		for i := range 20 {
			u := w.URL("h.test")
			if i > 0 {
				u += "p" + strconv.Itoa(i)
			}
			if n := len(get(t, c, u).body); n < 12000 || n > 13500 {
				t.Errorf("virtual %v: %s is %d bytes, want 12,000 of text and its markup", virtual, u, n)
			}
		}
	}
	if _, err := Start([]HostSpec{{Name: "h", Pages: 1, TextSize: -1}}, nil); !errors.Is(err, ErrBadSpec) {
		t.Errorf("TextSize -1: %v, want ErrBadSpec", err)
	}
}
