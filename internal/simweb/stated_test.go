package simweb

import (
	"net/http"
	"strconv"
	"testing"
	"time"
)

// TestStatedHeaders checks each header style against a frozen clock: the IETF fields of a
// bucket (remaining tokens, whole seconds until it is full), the X- fields (the window's end
// as a Unix time), a fixed window's count and end, and the X- fields of the limiter's own
// reset (a bucket full, a fixed window's end) as delta seconds or a Unix time, rounded up.
func TestStatedHeaders(t *testing.T) {
	tests := []struct {
		name string
		spec HostSpec
		want []map[string]string // headers of requests 1, 2, 3 at one instant
		next map[string]string   // FixedWindow: headers of a request 10 s later, in a new window
	}{
		{"ietf-bucket", HostSpec{Limit: 2, Burst: 2, Headers: HeadersIETF, PolicyWindow: 10 * time.Second},
			[]map[string]string{
				{"RateLimit-Policy": `"default";q=20;w=10`, "RateLimit": `"default";r=1;t=1`},
				{"RateLimit": `"default";r=0;t=1`},
				{"RateLimit": `"default";r=0;t=1`},
			}, nil},
		{"x-bucket", HostSpec{Limit: 10, Burst: 2, Headers: HeadersX, PolicyWindow: time.Minute},
			[]map[string]string{
				{"X-RateLimit-Limit": "600", "X-RateLimit-Remaining": "1",
					"X-RateLimit-Reset": strconv.FormatInt(t0.Add(time.Minute).Unix()+1, 10)},
				{"X-RateLimit-Remaining": "0"},
				{"X-RateLimit-Remaining": "0"},
			}, nil},
		{"ietf-fixed", HostSpec{Limit: 0.2, FixedWindow: 10 * time.Second, Headers: HeadersIETF, PolicyWindow: 10 * time.Second},
			[]map[string]string{
				{"RateLimit-Policy": `"default";q=2;w=10`, "RateLimit": `"default";r=1;t=10`},
				{"RateLimit": `"default";r=0;t=10`},
				{"RateLimit": `"default";r=0;t=10`},
			},
			map[string]string{"RateLimit": `"default";r=1;t=10`}},
		{"x-delta-bucket", HostSpec{Limit: 10, Burst: 2, Headers: HeadersXDelta, PolicyWindow: time.Minute},
			[]map[string]string{
				{"X-RateLimit-Limit": "600", "X-RateLimit-Remaining": "1", "X-RateLimit-Reset": "1"},
				{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "1"},
				{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "1"},
			}, nil},
		{"x-unix-bucket", HostSpec{Limit: 0.5, Burst: 2, Headers: HeadersXUnix, PolicyWindow: time.Minute},
			[]map[string]string{ // full 2 s and 4 s after t0 (12:00:00.3), rounded up
				{"X-RateLimit-Limit": "30", "X-RateLimit-Remaining": "1", "X-RateLimit-Reset": unix(t0.Add(2700 * time.Millisecond))},
				{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": unix(t0.Add(4700 * time.Millisecond))},
				{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": unix(t0.Add(4700 * time.Millisecond))},
			}, nil},
		{"x-unix-fixed", HostSpec{Limit: 0.2, FixedWindow: 10 * time.Second, Headers: HeadersXUnix, PolicyWindow: 10 * time.Second},
			[]map[string]string{
				{"X-RateLimit-Limit": "2", "X-RateLimit-Remaining": "1", "X-RateLimit-Reset": unix(t0.Add(10700 * time.Millisecond))},
				{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": unix(t0.Add(10700 * time.Millisecond))},
				{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": unix(t0.Add(10700 * time.Millisecond))},
			},
			map[string]string{"X-RateLimit-Remaining": "1", "X-RateLimit-Reset": unix(t0.Add(20700 * time.Millisecond))}},
		{"x-delta-fixed", HostSpec{Limit: 0.2, FixedWindow: 10 * time.Second, Headers: HeadersXDelta, PolicyWindow: 10 * time.Second},
			[]map[string]string{
				{"X-RateLimit-Limit": "2", "X-RateLimit-Remaining": "1", "X-RateLimit-Reset": "10"},
				{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "10"},
				{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "10"},
			},
			map[string]string{"X-RateLimit-Remaining": "1", "X-RateLimit-Reset": "10"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := newFakeClock(t0, 0)
			tc.spec.Name, tc.spec.Pages = "h", 3
			w, c := startWeb(t, []HostSpec{tc.spec}, &Options{Clock: clk.Now})
			for i, want := range tc.want {
				r := get(t, c, w.URL("h"))
				if wantStatus := []int{200, 200, 429}[i]; r.status != wantStatus {
					t.Fatalf("request %d: status %d, want %d", i+1, r.status, wantStatus)
				}
				for k, v := range want {
					if got := r.header.Get(k); got != v {
						t.Errorf("request %d: %s = %q, want %q", i+1, k, got, v)
					}
				}
			}
			if tc.next != nil {
				clk.Advance(10 * time.Second) // a new window
				r := get(t, c, w.URL("h"))
				if r.status != http.StatusOK {
					t.Errorf("next window: status %d", r.status)
				}
				for k, v := range tc.next {
					if got := r.header.Get(k); got != v {
						t.Errorf("next window: %s = %q, want %q", k, got, v)
					}
				}
			}
		})
	}
}

// unix is t as a Unix time in whole seconds, truncated (the caller rounds up).
func unix(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }
