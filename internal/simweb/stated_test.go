package simweb

import (
	"net/http"
	"strconv"
	"testing"
	"time"
)

// TestStatedHeaders checks each header style against a frozen clock: the IETF fields of a
// bucket (remaining tokens, whole seconds until it is full), the X- fields (the window's end
// as a Unix time) and a fixed window's count and end.
func TestStatedHeaders(t *testing.T) {
	tests := []struct {
		name string
		spec HostSpec
		want []map[string]string // headers of requests 1, 2, 3 at one instant
	}{
		{"ietf-bucket", HostSpec{Limit: 2, Burst: 2, Headers: HeadersIETF, PolicyWindow: 10 * time.Second},
			[]map[string]string{
				{"RateLimit-Policy": `"default";q=20;w=10`, "RateLimit": `"default";r=1;t=1`},
				{"RateLimit": `"default";r=0;t=1`},
				{"RateLimit": `"default";r=0;t=1`},
			}},
		{"x-bucket", HostSpec{Limit: 10, Burst: 2, Headers: HeadersX, PolicyWindow: time.Minute},
			[]map[string]string{
				{"X-RateLimit-Limit": "600", "X-RateLimit-Remaining": "1",
					"X-RateLimit-Reset": strconv.FormatInt(t0.Add(time.Minute).Unix()+1, 10)},
				{"X-RateLimit-Remaining": "0"},
				{"X-RateLimit-Remaining": "0"},
			}},
		{"ietf-fixed", HostSpec{Limit: 0.2, FixedWindow: 10 * time.Second, Headers: HeadersIETF, PolicyWindow: 10 * time.Second},
			[]map[string]string{
				{"RateLimit-Policy": `"default";q=2;w=10`, "RateLimit": `"default";r=1;t=10`},
				{"RateLimit": `"default";r=0;t=10`},
				{"RateLimit": `"default";r=0;t=10`},
			}},
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
			if tc.spec.FixedWindow > 0 {
				clk.Advance(10 * time.Second) // a new window
				if r := get(t, c, w.URL("h")); r.status != http.StatusOK || r.header.Get("RateLimit") != `"default";r=1;t=10` {
					t.Errorf("next window: status %d, RateLimit %q", r.status, r.header.Get("RateLimit"))
				}
			}
		})
	}
}
