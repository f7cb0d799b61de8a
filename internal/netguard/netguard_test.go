package netguard

import (
	"errors"
	"net/netip"
	"testing"
)

func TestCheck(t *testing.T) {
	cases := []struct {
		addr    string
		private bool
	}{
		{"8.8.8.8", false}, {"1.1.1.1", false}, {"2606:4700::1111", false}, {"93.184.216.34", false},
		{"127.0.0.1", true}, {"127.9.9.9", true}, {"10.1.2.3", true}, {"172.16.0.1", true}, {"172.31.255.255", true},
		{"172.32.0.1", false}, {"192.168.1.1", true}, {"169.254.169.254", true}, {"100.64.0.1", true},
		{"0.0.0.0", true}, {"::", true}, {"::1", true}, {"fd00::1", true}, {"fe80::1", true},
		{"::ffff:127.0.0.1", true}, {"::ffff:169.254.169.254", true}, {"224.0.0.1", true}, {"255.255.255.255", true},
		// IPv6 forms that carry an IPv4 address are judged by it
		{"::a00:1", true}, {"::7f00:1", true}, {"::808:808", false},
		{"64:ff9b::a00:1", true}, {"64:ff9b::a9fe:a9fe", true}, {"64:ff9b::808:808", false},
		{"::ffff:0:a00:1", true}, {"::ffff:0:808:808", false},
		{"64:ff9b:1::808:808", true}, {"64:ff9b:1:ffff::1", true}, // local-use NAT64: never global
	}
	var g Guard
	for _, tc := range cases {
		err := g.Check(netip.MustParseAddr(tc.addr))
		if got := errors.Is(err, ErrPrivateAddress); got != tc.private {
			t.Errorf("Check(%s) = %v, want private=%v", tc.addr, err, tc.private)
		}
	}
}

func TestAllowedBlockAndAllowAll(t *testing.T) {
	var g Guard
	g.Allow(netip.MustParseAddr("127.0.0.1"))
	g.Allow(netip.MustParseAddr("8.8.8.8")) // public: no effect
	if err := g.Check(netip.MustParseAddr("127.0.0.2")); err != nil {
		t.Errorf("seed's block 127/8 should be allowed: %v", err)
	}
	if err := g.Check(netip.MustParseAddr("169.254.169.254")); err == nil {
		t.Error("metadata address allowed by a loopback seed")
	}
	if len(g.Allowed) != 1 {
		t.Errorf("Allowed = %v, want only 127.0.0.0/8", g.Allowed)
	}
	g2 := Guard{AllowAll: true}
	if err := g2.Check(netip.MustParseAddr("10.0.0.1")); err != nil {
		t.Errorf("AllowAll refused: %v", err)
	}
}

func TestControl(t *testing.T) {
	var g Guard
	for addr, bad := range map[string]bool{"127.0.0.1:80": true, "[::1]:443": true, "[fe80::1%eth0]:80": true, "8.8.8.8:53": false, "nonsense": true} {
		if err := g.Control("tcp", addr, nil); (err != nil) != bad {
			t.Errorf("Control(%q) = %v, want refused=%v", addr, err, bad)
		}
	}
}

// TestEndpoints: an allowed endpoint (a proxy) lets exactly its address and port through
// Control; another port of the same address, and the rest of its block, stay refused.
func TestEndpoints(t *testing.T) {
	var g Guard
	g.AllowEndpoint(netip.MustParseAddrPort("127.0.0.1:3128"))
	g.AllowEndpoint(netip.MustParseAddrPort("[::ffff:127.0.0.1]:3128")) // the same, mapped
	if len(g.Endpoints) != 1 {
		t.Errorf("Endpoints = %v, want one", g.Endpoints)
	}
	for addr, bad := range map[string]bool{"127.0.0.1:3128": false, "[::ffff:127.0.0.1]:3128": false,
		"127.0.0.1:8000": true, "127.0.0.2:3128": true, "[::1]:3128": true, "localhost:3128": true} {
		if err := g.Control("tcp", addr, nil); (err != nil) != bad {
			t.Errorf("Control(%q) = %v, want refused=%v", addr, err, bad)
		}
	}
	if err := g.Check(netip.MustParseAddr("127.0.0.1")); err == nil {
		t.Error("Check allowed the endpoint's address without its port")
	}
}
