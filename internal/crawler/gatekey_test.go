package crawler

import (
	"context"
	"errors"
	"net/netip"
	"runtime"
	"testing"
	"time"
)

func TestGateKeys(t *testing.T) {
	addrs := map[string][]netip.Addr{
		"a.example":  {netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("192.0.2.9"), netip.MustParseAddr("192.0.2.7")},
		"b.example":  {netip.MustParseAddr("192.0.2.7")},
		"v6.example": {netip.MustParseAddr("2001:db8::2"), netip.MustParseAddr("2001:db8::1")},
	}
	release := make(chan struct{})
	g := newGateKeys(true, nil)
	g.lookup = func(ctx context.Context, name string) ([]netip.Addr, error) {
		<-release
		if a, ok := addrs[name]; ok {
			return a, nil
		}
		return nil, errors.New("no such host")
	}
	if k, ok := g.key("a.example"); ok {
		t.Fatalf("key before the lookup ended: %q, want not ready", k)
	}
	close(release)
	// The background lookup ends soon after release; wait for it without a fixed sleep.
	deadline := time.Now().Add(5 * time.Second)
	for {
		if k, ok := g.key("a.example"); ok {
			if k != "192.0.2.7" {
				t.Errorf(`key("a.example") = %q, want the lowest IPv4 address 192.0.2.7`, k)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the lookup never ended")
		}
		runtime.Gosched()
	}
	ctx := context.Background()
	tests := []struct{ host, want string }{
		{"b.example", "192.0.2.7"},             // another name of the same server: the same gate
		{"b.example:8080", "192.0.2.7:8080"},   // the port is kept
		{"v6.example", "[2001:db8::1]"},        // IPv6 only: the lowest
		{"v6.example:81", "[2001:db8::1]:81"},  // with a port
		{"nowhere.example", "nowhere.example"}, // does not resolve: keyed by its name
		{"198.51.100.4:8000", "198.51.100.4:8000"},
		{"[::ffff:198.51.100.4]", "198.51.100.4"},
	}
	for _, tc := range tests {
		if got := g.keyNow(ctx, tc.host); got != tc.want {
			t.Errorf("keyNow(%q) = %q, want %q", tc.host, got, tc.want)
		}
		if got := g.known(tc.host); got != tc.want {
			t.Errorf("known(%q) = %q, want %q", tc.host, got, tc.want)
		}
	}
	if got := g.known("unseen.example"); got != "unseen.example" {
		t.Errorf("known of a host never looked up = %q, want the host", got)
	}
	var none *gateKeys // the zero value keys by name, like KeyByIP off
	if k, ok := none.key("a.example:81"); !ok || k != "a.example:81" || none.known("a.example") != "a.example" || none.keyNow(ctx, "b") != "b" {
		t.Errorf("nil gateKeys: key = %q, %v; want the host itself", k, ok)
	}
	byName := newGateKeys(false, nil)
	if k, ok := byName.key("a.example:81"); !ok || k != "a.example:81" {
		t.Errorf("without KeyByIP: key = %q, %v; want the host itself", k, ok)
	}
}
