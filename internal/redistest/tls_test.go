package redistest

import (
	"context"
	"crypto/tls"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A TLS server answers only TLS clients that trust its authority; with client certificates
// required, only a client presenting one.
func TestTLSServer(t *testing.T) {
	certs := NewCerts(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name    string
		clients ClientCerts
		conf    *tls.Config
		wantErr string
	}{
		{"trusted", ClientCertsNone, &tls.Config{RootCAs: certs.pool, ServerName: "127.0.0.1"}, ""},
		{"no TLS", ClientCertsNone, nil, "EOF"},
		{"unknown authority", ClientCertsNone, &tls.Config{ServerName: "127.0.0.1"}, "certificate signed by unknown authority"},
		{"wrong name", ClientCertsNone, &tls.Config{RootCAs: certs.pool, ServerName: "redis.example"}, "redis.example"},
		{"client cert required, none given", ClientCertsRequired, &tls.Config{RootCAs: certs.pool, ServerName: "127.0.0.1"}, "certificate"},
		{"client cert required and given", ClientCertsRequired, certs.ClientConfig(), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := StartWith(t, Options{TLS: certs, ClientCerts: tc.clients})
			if !strings.HasPrefix(s.URL(), "rediss://") {
				t.Errorf("URL %s, want rediss://", s.URL())
			}
			rdb := redis.NewClient(&redis.Options{Addr: s.Addr, TLSConfig: tc.conf, MaxRetries: -1})
			defer rdb.Close()
			err := rdb.Ping(ctx).Err()
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("PING: %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// With Options.Users the default user is off; a user's key pattern is enforced.
func TestACLUsers(t *testing.T) {
	s := StartWith(t, Options{Users: []string{"alice on >pw ~crawl:* +@all"}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client := func(user, pass string) *redis.Client {
		rdb := redis.NewClient(&redis.Options{Addr: s.Addr, Username: user, Password: pass, MaxRetries: -1})
		t.Cleanup(func() { rdb.Close() })
		return rdb
	}
	if err := client("", "").Set(ctx, "crawl:x", 1, 0).Err(); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Errorf("default user: %v, want NOAUTH", err)
	}
	if err := client("alice", "nope").Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
		t.Errorf("wrong password: %v, want WRONGPASS", err)
	}
	alice := client("alice", "pw")
	if err := alice.Set(ctx, "crawl:x", 1, 0).Err(); err != nil {
		t.Errorf("alice SET crawl:x: %v", err)
	}
	if err := alice.Set(ctx, "other", 1, 0).Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Errorf("alice SET other: %v, want NOPERM", err)
	}
}

// A cluster of 3 masters and 3 replicas with TLS on every link (clients, bus, replication)
// and ACL users forms, its replicas sync (as AdminUser), a cluster client that trusts the
// authority and logs in reaches every slot, and a killed master's replica takes over.
func TestClusterTLSAndUsers(t *testing.T) {
	certs := NewCerts(t)
	c := StartClusterWith(t, 3, 1, Options{TLS: certs, Users: []string{"alice on >pw ~* +@all"}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), TLSConfig: certs.ClientConfig(),
		Username: "alice", Password: "pw", ClusterStateReloadInterval: 200 * time.Millisecond})
	defer rdb.Close()
	failOver(ctx, t, c, rdb, []string{"a", "b", "c", "{1}x", "{2}y", "{3}z"})
}
