package fleet

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// ReportTTL is how long a worker's last report stays readable after it stops reporting: a
// worker that stopped or died stays in the fleet view (as WorkerGone) this long.
const ReportTTL = time.Minute

// WorkerReport is what a worker tells the fleet about itself, about once a second, for the
// fleet view (ReadView). The partitions it holds are not part of it: the view reads them from
// the partitions' owner keys, which are authoritative.
type WorkerReport struct {
	Pages int64  // pages this worker fetched and stored since it started
	Host  string // the machine it runs on (os.Hostname), for the operator
	Data  string // its local store (the --data directory), where its pages are
}

// Report records r as s's worker's latest report, stamped with Redis' clock, in a hash of its
// own that expires ReportTTL after the last report. One script, one Redis Cluster slot (the
// keys share the tag {workers}). It changes no partition and is not fenced.
func (s *Store) Report(ctx context.Context, r WorkerReport) error {
	ks := []string{s.k.reports(), s.k.report(s.worker)}
	err := reportScript.Run(ctx, s.rdb, ks, s.worker, r.Pages, r.Host, r.Data,
		s.opts.LeaseTTL.Milliseconds(), ReportTTL.Milliseconds()).Err()
	if err != nil {
		return fmt.Errorf("fleet: report worker %s: %w", s.worker, err)
	}
	return nil
}

// reportScript: KEYS reports, report; ARGV worker, pages, host, data, lease-ttl-ms, keep-ms.
// Writes the worker's report hash with Redis' time, indexes it in the reports zset (scored by
// that time) and forgets reports older than keep-ms.
var reportScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', KEYS[2], 'pages', ARGV[2], 'host', ARGV[3], 'data', ARGV[4], 'ttl', ARGV[5], 'at', now)
redis.call('PEXPIRE', KEYS[2], ARGV[6])
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[6]))
return 1
`)

// reports is the index of the workers' reports: worker id scored by its last report (ms, Redis
// clock). It and the report hashes share the hash tag {workers}, outside the partitions.
func (k keys) reports() string { return "crawl:" + k.crawl + ":{workers}:reports" }

// report is worker's report hash.
func (k keys) report(worker string) string { return "crawl:" + k.crawl + ":{workers}:report:" + worker }
