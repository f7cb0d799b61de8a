package fleet

import (
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/crawl-project/crawl/internal/redistest"
	"github.com/redis/go-redis/v9"
)

const testPassword = "hunter2-s3cret"

// users are the ACL users of the servers of these tests: crawler may use the keys of the crawl
// "t" only (crawl:t:*, as the tests' stores name it), other only other:* keys.
var users = []string{
	"crawler on >" + testPassword + " " + strings.Replace(ACL, "~crawl:*", "~crawl:t:*", 1),
	"other on >" + testPassword + " " + strings.Replace(ACL, "~crawl:*", "~other:*", 1),
}

// targetURL is the rediss:// URL of addr as user with password pass, trusting certs' authority.
func targetURL(certs *redistest.Certs, user, pass, addr string) string {
	return "rediss://" + user + ":" + pass + "@" + addr + "/0?tls_ca=" + url.QueryEscape(certs.CA)
}

func TestParseTargetTLSFiles(t *testing.T) {
	parallel(t)
	certs := redistest.NewCerts(t)
	notPEM := filepath.Join(t.TempDir(), "not.pem")
	os.WriteFile(notPEM, []byte("hello"), 0o600)
	missing := filepath.Join(t.TempDir(), "missing.pem")
	q := url.QueryEscape
	for _, tc := range []struct {
		name, query string
		scheme      string
		roots, cert bool
		wantErr     string
	}{
		{name: "system roots", query: ""},
		{name: "private CA", query: "tls_ca=" + q(certs.CA), roots: true},
		{name: "client cert", query: "tls_cert=" + q(certs.ClientCert) + "&tls_key=" + q(certs.ClientKey), cert: true},
		{name: "all and go-redis options", query: "tls_ca=" + q(certs.CA) + "&tls_cert=" + q(certs.ClientCert) + "&tls_key=" + q(certs.ClientKey) + "&dial_timeout=3s", roots: true, cert: true},
		{name: "skip_verify", query: "skip_verify=true", wantErr: "skip_verify is refused"},
		{name: "missing CA", query: "tls_ca=" + q(missing), wantErr: "tls_ca: open " + missing},
		{name: "CA not PEM", query: "tls_ca=" + q(notPEM), wantErr: "no PEM certificate in " + notPEM},
		{name: "empty CA", query: "tls_ca=", wantErr: "tls_ca: no file named"},
		{name: "cert without key", query: "tls_cert=" + q(certs.ClientCert), wantErr: "tls_cert and tls_key go together"},
		{name: "key not a key", query: "tls_cert=" + q(certs.ClientCert) + "&tls_key=" + q(notPEM), wantErr: "tls_key " + notPEM},
		{name: "CA without TLS", scheme: "redis", query: "tls_ca=" + q(certs.CA), wantErr: "need rediss://"},
		{name: "unknown option", query: "tls_ca=" + q(certs.CA) + "&colour=blue", wantErr: "unexpected option: colour"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			scheme := tc.scheme
			if scheme == "" {
				scheme = "rediss"
			}
			raw := scheme + "://crawler:" + testPassword + "@r1.example:6380,r2.example:6380/0?" + tc.query
			got, err := ParseTarget(raw)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one containing %q", err, tc.wantErr)
				}
				if strings.Contains(err.Error(), testPassword) {
					t.Errorf("the error shows the password: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			c := got.opts.TLSConfig
			if c == nil || !got.TLS {
				t.Fatal("no TLS configuration for rediss://")
			}
			if c.InsecureSkipVerify || (c.RootCAs != nil) != tc.roots || (len(c.Certificates) > 0) != tc.cert {
				t.Errorf("insecure %v, roots %v, %d certificates; want roots %v, certificate %v", c.InsecureSkipVerify, c.RootCAs != nil, len(c.Certificates), tc.roots, tc.cert)
			}
		})
	}
}

// rediss:// with tls_ca and an ACL user reaches a TLS server and a TLS cluster (found from one
// node); a wrong password, an untrusted certificate, a server asking for a client certificate
// not given, and redis:// to a TLS port fail with errors that say why and never show the
// password.
func TestDialTLSAndACL(t *testing.T) {
	parallel(t)
	certs := redistest.NewCerts(t)
	o := redistest.Options{TLS: certs, Users: users}
	single := redistest.StartWith(t, o)
	cluster := redistest.StartClusterWith(t, 3, 0, o)
	o.ClientCerts = redistest.ClientCertsRequired
	mutual := redistest.StartWith(t, o)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dial := func(raw string) (redis.UniversalClient, error) {
		tg, err := ParseTarget(raw)
		if err != nil {
			t.Fatal(err)
		}
		rdb, err := tg.Dial(ctx, func(o *redis.Options) { o.MaxRetries = -1 })
		if err == nil {
			err = rdb.Ping(ctx).Err()
		}
		return rdb, err
	}
	for _, tc := range []struct {
		name string
		addr string
		want string // the client's type
	}{
		{"single", single.Addr, "*redis.Client"},
		{"cluster", cluster.Nodes[1].Addr, "*redis.ClusterClient"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rdb, err := dial(targetURL(certs, "crawler", testPassword, tc.addr))
			if err != nil {
				t.Fatal(err)
			}
			defer rdb.Close()
			if got := typeName(rdb); got != tc.want {
				t.Errorf("client %s, want %s", got, tc.want)
			}
			for _, k := range []string{"crawl:t:a", "crawl:t:{1}b", "crawl:t:{2}c", "crawl:t:{3}d"} {
				if err := rdb.Set(ctx, k, 1, 0).Err(); err != nil {
					t.Fatalf("SET %s: %v", k, err)
				}
			}
			for _, k := range []string{"other:a", "crawl:u:config"} {
				if err := rdb.Set(ctx, k, 1, 0).Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
					t.Errorf("SET %s as crawler: %v, want NOPERM", k, err)
				}
			}
			for _, bad := range []struct{ name, url, want string }{
				{"wrong password", targetURL(certs, "crawler", "not-"+testPassword, tc.addr), "WRONGPASS"},
				{"no user", "rediss://" + tc.addr + "/0?tls_ca=" + url.QueryEscape(certs.CA), "NOAUTH"},
				{"system roots", "rediss://crawler:" + testPassword + "@" + tc.addr + "/0", "certificate signed by unknown authority (to trust a private authority, add tls_ca=FILE"},
				{"no TLS", "redis://crawler:" + testPassword + "@" + tc.addr + "/0", tc.addr + ": EOF (the server closed the connection: if it speaks TLS only, use rediss://)"},
			} {
				rdb, err := dial(bad.url)
				if err == nil {
					rdb.Close()
					t.Errorf("%s: no error", bad.name)
					continue
				}
				if !strings.Contains(err.Error(), bad.want) || strings.Contains(err.Error(), testPassword) {
					t.Errorf("%s: %v; want an error containing %q, not the password", bad.name, err, bad.want)
				}
			}
		})
	}
	t.Run("TLS to a plain server", func(t *testing.T) {
		plain := redistest.Start(t)
		tg, err := ParseTarget("rediss://" + plain.Addr + "/0")
		if err != nil {
			t.Fatal(err)
		}
		// redis-server reads the handshake as an unfinished inline command and waits for more
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		rdb, err := tg.Dial(ctx, func(o *redis.Options) { o.MaxRetries = -1 })
		if err == nil {
			rdb.Close()
			t.Fatal("no error")
		}
		// (a server that answers the handshake in plain text gets the RecordHeaderError hint)
		if want := "use redis://)"; !strings.Contains(err.Error(), want) {
			t.Errorf("%v; want %q", err, want)
		}
	})
	t.Run("client certificate", func(t *testing.T) {
		base := targetURL(certs, "crawler", testPassword, mutual.Addr)
		if rdb, err := dial(base); err == nil {
			rdb.Close()
			t.Error("no client certificate given to a server that requires one: no error")
		}
		rdb, err := dial(base + "&tls_cert=" + url.QueryEscape(certs.ClientCert) + "&tls_key=" + url.QueryEscape(certs.ClientKey))
		if err != nil {
			t.Fatal(err)
		}
		rdb.Close()
	})
}

func typeName(rdb redis.UniversalClient) string {
	switch rdb.(type) {
	case *redis.Client:
		return "*redis.Client"
	case *redis.ClusterClient:
		return "*redis.ClusterClient"
	}
	return "?"
}

// The store's, keepers' and frontier's tests, run again as the ACL user crawler (rules ACL)
// over TLS, on one server and on a 3-master cluster: every command the fleet sends is one the
// documented ACL allows. A user whose keys are other:* cannot open the crawl, and is told so.
func TestACLUserOverTLS(t *testing.T) {
	parallel(t)
	certs := redistest.NewCerts(t)
	o := redistest.Options{TLS: certs, Users: users}
	tests := []func(*testing.T){
		TestOpenChecksConfiguration,
		TestCompleteStatesAndLinks,
		TestTakeoverReclaimsAndFences,
		TestHostStateFollowsThePartition,
		TestKeepersShareAndRebalance,
		TestWorkersShareCrawlAndSurviveADeadOne,
		TestFrontierCrawlsToTheEnd,
		TestReadViewCountsAndWorkers,
		TestOperatorReads,
	}
	t.Run("single", func(t *testing.T) {
		t.Parallel()
		s := redistest.StartWith(t, o)
		onTarget(t, targetURL(certs, "crawler", testPassword, s.Addr), []*redistest.Server{s}, tests...)
		refusedOtherKeys(t, targetURL(certs, "other", testPassword, s.Addr))
	})
	t.Run("cluster", func(t *testing.T) {
		t.Parallel()
		c := redistest.StartClusterWith(t, 3, 0, o)
		onTarget(t, targetURL(certs, "crawler", testPassword, c.Nodes[0].Addr), c.Nodes, tests...)
		refusedOtherKeys(t, targetURL(certs, "other", testPassword, c.Nodes[0].Addr))
	})
}

// refusedOtherKeys checks that the user of raw, whose keys are not crawl:*, cannot open a
// crawl: the error names the refusal (NOPERM).
func refusedOtherKeys(t *testing.T, raw string) {
	t.Helper()
	tg, err := ParseTarget(raw)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rdb, err := tg.Dial(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	_, err = Open(ctx, rdb, "t", "w", &Options{Partitions: 4})
	if err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Errorf("open as a user without crawl:* keys: %v, want NOPERM", err)
	}
	if err != nil && strings.Contains(err.Error(), testPassword) {
		t.Errorf("the error shows the password: %v", err)
	}
}

// onTarget runs each test of tests with newRedis dialing raw (fleet.Target), after emptying
// nodes (as their admin user).
func onTarget(t *testing.T, raw string, nodes []*redistest.Server, tests ...func(*testing.T)) {
	tg, err := ParseTarget(raw)
	if err != nil {
		t.Fatal(err)
	}
	target(t, func(t *testing.T) redis.UniversalClient {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, n := range nodes {
			admin := n.Client()
			err := admin.FlushAll(ctx).Err()
			admin.Close()
			if err != nil && !errors.Is(err, context.Canceled) && !strings.Contains(err.Error(), "READONLY") {
				t.Fatalf("FLUSHALL %s: %v", n.Addr, err)
			}
		}
		rdb, err := tg.Dial(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rdb.Close() })
		return rdb
	})
	for _, test := range tests {
		name := runtime.FuncForPC(reflect.ValueOf(test).Pointer()).Name()
		t.Run(name[strings.LastIndexByte(name, '.')+1:], test)
	}
	// a refusal the fleet's code swallows (one INFO that falls back to a figure known before)
	// shows only in the servers' ACL LOG
	for _, n := range nodes {
		admin := n.Client()
		entries, err := admin.Do(context.Background(), "ACL", "LOG").Slice()
		admin.Close()
		if err != nil {
			t.Fatalf("ACL LOG on %s: %v", n.Addr, err)
		}
		for _, e := range entries {
			f, _ := e.(map[any]any)
			if f == nil {
				if l, ok := e.([]any); ok {
					f = map[any]any{}
					for i := 0; i+1 < len(l); i += 2 {
						f[l[i]] = l[i+1]
					}
				}
			}
			t.Errorf("%s refused %v of user %v (%v %v)", n.Addr, f["object"], f["username"], f["reason"], f["context"])
		}
	}
}
