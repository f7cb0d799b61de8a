package fleet

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/crawl-project/crawl/internal/redistest"
	"github.com/redis/go-redis/v9"
)

func TestParseTarget(t *testing.T) {
	for _, tc := range []struct {
		url     string
		addrs   string
		db      int
		tls     bool
		user    string
		wantErr string
	}{
		{url: "redis://127.0.0.1:7101/0", addrs: "127.0.0.1:7101"},
		{url: "redis://a:1,b:2,c/3", addrs: "a:1,b:2,c:6379", db: 3},
		{url: "rediss://crawler:s3cret@r1.example:6380,r2.example:6380/0", addrs: "r1.example:6380,r2.example:6380", tls: true, user: "crawler"},
		{url: "redis://[::1]:7000", addrs: "[::1]:7000"},
		{url: "http://127.0.0.1:6379/0", wantErr: "want redis://"},
		{url: "127.0.0.1:6379", wantErr: "want redis://"},
		{url: "redis://a:1,,b:2/0", wantErr: "empty node"},
		{url: "redis://a:1/x", wantErr: "invalid database"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			got, err := ParseTarget(tc.url)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if a := strings.Join(got.Addrs, ","); a != tc.addrs || got.DB != tc.db || got.TLS != tc.tls || got.opts.Username != tc.user {
				t.Errorf("addrs %s db %d tls %v user %q; want %s %d %v %q", a, got.DB, got.TLS, got.opts.Username, tc.addrs, tc.db, tc.tls, tc.user)
			}
		})
	}
}

// Dial gives a single-node client for a plain server and a cluster client for any node of a
// cluster (the first seed may be down), and refuses a cluster URL naming a database other than 0.
func TestDialFindsCluster(t *testing.T) {
	parallel(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	single := redistest.Start(t)
	c := redistest.StartCluster(t, 3, 0)
	dial := func(url string) (redis.UniversalClient, error) {
		tg, err := ParseTarget(url)
		if err != nil {
			t.Fatal(err)
		}
		return tg.Dial(ctx, nil)
	}
	rdb, err := dial(single.URL())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := rdb.(*redis.Client); !ok {
		t.Errorf("single server: %T, want *redis.Client", rdb)
	}
	rdb.Close()
	down := "127.0.0.1:1"
	rdb, err = dial("redis://" + down + "," + c.Nodes[1].Addr + "/0")
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	if _, ok := rdb.(*redis.ClusterClient); !ok {
		t.Fatalf("cluster: %T, want *redis.ClusterClient", rdb)
	}
	// keys of every slot, read back through the one client
	for _, k := range []string{"a", "b", "c", "{1}x", "{2}y", "{3}z"} {
		if err := rdb.Set(ctx, k, k, 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
	}
	if _, err := dial(strings.TrimSuffix(c.URL(), "/0") + "/2"); err == nil || !strings.Contains(err.Error(), "only database 0") {
		t.Errorf("cluster with database 2: err %v, want a refusal naming database 0", err)
	}
	if _, err := dial("redis://" + down + "/0"); err == nil || !strings.Contains(err.Error(), down) {
		t.Errorf("nothing reachable: err %v, want one naming %s", err, down)
	}
}
