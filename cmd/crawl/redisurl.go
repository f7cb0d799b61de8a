package main

import (
	"context"
	"fmt"
	"io"

	"github.com/crawl-project/crawl/internal/fleet"
	"github.com/redis/go-redis/v9"
)

// redisURLForm is how --redis is written, for flag help and usage errors.
const redisURLForm = "redis://[USER:PASSWORD@]HOST:PORT[,HOST:PORT…]/DB, or rediss://…[?tls_ca=FILE] for TLS"

// dialRedis connects to the Redis, Valkey or Redis Cluster that --redis names (fleet.Target:
// one node's URL finds a whole cluster). cmd names the command in messages; tune adjusts the
// connection options. A malformed URL is a usage error (exitUsage), as is a server that cannot
// be reached or refuses the URL's user: the message names the address and the cause.
func dialRedis(ctx context.Context, cmd, raw string, tune func(*redis.Options), stderr io.Writer) (redis.UniversalClient, fleet.Target, int) {
	t, err := fleet.ParseTarget(raw)
	if err != nil {
		fmt.Fprintf(stderr, "crawl %s: --redis %v\n", cmd, err)
		return nil, t, exitUsage
	}
	redis.SetLogger(quietRedis{}) // its pool's dial errors would repeat what the command reports
	rdb, err := t.Dial(ctx, tune)
	if err == nil {
		err = rdb.Ping(ctx).Err()
		if err != nil {
			rdb.Close()
		}
	}
	if redis.IsAuthError(err) || redis.IsPermissionError(err) {
		fmt.Fprintf(stderr, "crawl %s: Redis at %s refused the login: %v\n", cmd, t.Addrs[0], err)
		return nil, t, exitUsage
	}
	if err != nil {
		fmt.Fprintf(stderr, "crawl %s: Redis at %s unreachable: %v\n", cmd, t.Addrs[0], err)
		return nil, t, exitUsage
	}
	return rdb, t, exitOK
}
