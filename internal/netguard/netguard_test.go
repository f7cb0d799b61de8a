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
