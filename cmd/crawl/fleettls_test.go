package main

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/crawl-project/crawl/internal/fleet"
	"github.com/crawl-project/crawl/internal/redistest"
	"github.com/crawl-project/crawl/internal/simweb"
	"github.com/redis/go-redis/v9"
)

const tlsPassword = "hunter2-s3cret"

// Two workers given rediss://crawler:…@ONE-NODE/0?tls_ca=FILE share a crawl of a small web,
// on one TLS server and on a 3-master TLS cluster, as an ACL user with fleet.ACL's rules only:
// every page once, nothing left in Redis, and no worker's output shows the password.
// crawl status reads the crawl through the same URL, and a wrong password is refused with a
// message that names the server, not the password.
func TestFleetTLSAndACL(t *testing.T) {
	t.Parallel()
	var specs []simweb.HostSpec
	for i := range 3 {
		specs = append(specs, simweb.HostSpec{Name: fmt.Sprintf("h%d", i), Pages: 12, CrossLinks: []string{fmt.Sprintf("h%d", (i+1)%3)}})
	}
	certs := redistest.NewCerts(t)
	o := redistest.Options{TLS: certs, Users: []string{"crawler on >" + tlsPassword + " " + fleet.ACL}}
	// each starts its Redis and returns a node's address and a client with every permission
	for _, tc := range []struct {
		name  string
		start func(t *testing.T) (string, redis.UniversalClient)
	}{
		{"single", func(t *testing.T) (string, redis.UniversalClient) {
			s := redistest.StartWith(t, o)
			return s.Addr, s.Client()
		}},
		{"cluster", func(t *testing.T) (string, redis.UniversalClient) {
			c := redistest.StartClusterWith(t, 3, 0, o)
			return c.Nodes[0].Addr, redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), TLSConfig: certs.ClientConfig(),
				Username: redistest.AdminUser, Password: redistest.AdminPassword})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node, rdb := tc.start(t)
			t.Cleanup(func() { rdb.Close() })
			u := "rediss://crawler:" + tlsPassword + "@" + node + "/0?tls_ca=" + url.QueryEscape(certs.CA)
			f := newFleetOn(t, u, rdb, specs, steadyLease)
			start := time.Now()
			ws := []*worker{f.start(""), f.start("")}
			f.finish(ws...)
			t.Logf("2 workers over TLS as an ACL user: %d pages in %v", f.expected(), time.Since(start).Round(time.Millisecond))
			f.checkComplete(0)
			f.idleInRedis()
			for _, w := range ws {
				if strings.Contains(w.out.String(), tlsPassword) {
					t.Errorf("%s shows the password:\n%s", w.name, w.out)
				}
			}
			code, out := crawlOutput(t, f.ctx, "status", "--redis", u, "--crawl", "t", "--json")
			if code != exitOK || !strings.Contains(out, fmt.Sprintf(`"fetched": %d`, f.expected())) {
				t.Errorf("crawl status through TLS: exit %d, want 0 and %d fetched:\n%s", code, f.expected(), out)
			}
			bad := strings.Replace(u, tlsPassword, "not-"+tlsPassword, 1)
			code, out = crawlOutput(t, f.ctx, "status", "--redis", bad, "--crawl", "t")
			t.Logf("crawl status with a wrong password: %s", strings.TrimSpace(out))
			if code != exitUsage || !strings.Contains(out, "Redis at "+node+" refused the login: ") || !strings.Contains(out, "WRONGPASS") || strings.Contains(out, tlsPassword) {
				t.Errorf("crawl status with a wrong password: exit %d, want %d and a message naming %s and WRONGPASS, not the password:\n%s", code, exitUsage, node, out)
			}
		})
	}
}
