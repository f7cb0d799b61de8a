package fleet

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/crawl-project/crawl/frontier"
	"github.com/crawl-project/crawl/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// protoComplete: the completion with the seen check done by the owner: KEYS owner, inflight,
// counts, outbox, hosts, seen log, then per result its host's delayed set, then per group its
// queue; ARGV token, payload, nres, packed fingerprints of the new URLs, then per result
// member, kind, retry item, not-before, host, reason, then per group host, count, items.
var protoComplete = redis.NewScript(fence + counters + `
local nres = tonumber(ARGV[3])
local add, flush = counter(KEYS[3])
local names = {f='fetched', F='failed', x='excluded'}
local members, res, gone = {}, {}, {}
for i = 0, nres - 1 do members[i+1] = ARGV[5 + 6*i] end
local sc = redis.call('ZMSCORE', KEYS[2], unpack(members))
for j = 1, #members do
  if sc[j] then res[j] = 1; gone[#gone+1] = members[j] else res[j] = 0 end
end
if #gone > 0 then redis.call('ZREM', KEYS[2], unpack(gone)) end
add('inflight', -#gone)
for i = 0, nres - 1 do
  if res[i+1] == 1 then
    local a = 5 + 6*i
    local k = ARGV[a+1]
    if k == 'r' then
      redis.call('ZADD', KEYS[7+i], ARGV[a+3], ARGV[a+2])
      redis.call('SADD', KEYS[5], ARGV[a+4])
      add('delayed', 1)
    else
      add('queued', -1)
      add(names[k], 1)
    end
  end
end
local a, kg, added = 5 + 6*nres, 7 + nres, 0
for g = kg, #KEYS do
  local host, c = ARGV[a], tonumber(ARGV[a+1])
  local len = redis.call('RPUSH', KEYS[g], unpack(ARGV, a + 2, a + 1 + c))
  if len == c then redis.call('SADD', KEYS[5], host) end
  added = added + c
  a = a + 2 + c
end
add('queued', added)
if ARGV[4] ~= '' then redis.call('APPEND', KEYS[6], ARGV[4]) end
if ARGV[2] ~= '' then
  redis.call('RPUSH', KEYS[4], ARGV[2])
  add('outbox', 1)
end
flush()
return res
`)

// protoCompleteBatch is CompleteBatch with the seen-set in the caller's memory (seen).
func (s *Store) protoCompleteBatch(ctx context.Context, o Ownership, ds []Done, seen map[uint64]struct{}) ([]bool, error) {
	p := o.Partition
	ks := []string{s.k.owner(p), s.k.inflight(p), s.k.counts(p), s.k.outbox(p), s.k.hosts(p), s.k.part(p, "sl")}
	args := []any{o.token, "", len(ds), ""}
	var pl outboxPayload
	var here []frontier.Entry
	var fps []byte
	for _, d := range ds {
		l, r := d.Lease, d.Result
		if r.Kind == frontier.Fetched {
			for _, e := range r.Links {
				if !s.ownLink(p, e.Host) {
					pl.Links = append(pl.Links, e)
					continue
				}
				fp := Fingerprint(e.URL)
				if _, ok := seen[fp]; ok {
					continue
				}
				seen[fp] = struct{}{}
				fps = binary.LittleEndian.AppendUint64(fps, fp)
				here = append(here, e)
			}
		}
		ks = append(ks, s.k.delayed(p, l.Host))
		args = append(args, l.member, "f", "", 0, l.Host, "")
	}
	args[3] = string(fps)
	if len(pl.Links) > 0 {
		b, _ := json.Marshal(pl)
		args[1] = string(b)
	}
	groups := map[string][]frontier.Entry{}
	var order []string
	for _, e := range here {
		if _, ok := groups[e.Host]; !ok {
			order = append(order, e.Host)
		}
		groups[e.Host] = append(groups[e.Host], e)
	}
	for _, h := range order {
		ks = append(ks, s.k.queue(p, h))
		args = append(args, h, len(groups[h]))
		for _, e := range groups[h] {
			args = append(args, itemOf(e, 0).encode())
		}
	}
	r, err := protoComplete.Run(ctx, s.rdb, ks, args...).Int64Slice()
	if err = scriptErr(err); err != nil {
		return nil, err
	}
	in := make([]bool, len(ds))
	for i := range in {
		in[i] = r[i] == 1
	}
	return in, nil
}

// BenchmarkRedisNewURLOwned is BenchmarkRedisNewURL with the owner's seen check in memory.
func BenchmarkRedisNewURLOwned(b *testing.B) {
	ctx := context.Background()
	srv := redistest.Start(b)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	b.Cleanup(func() { rdb.Close() })
	s, err := Open(ctx, rdb, "newurl", "bench", &Options{LeaseTTL: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	const host = "www.site.example"
	url := func(i int) frontier.Entry {
		return frontier.Entry{URL: fmt.Sprintf("https://%s/articles/%d/some-title-%d.html", host, i/100, i), Host: host, Depth: 2, Parent: "https://" + host + "/"}
	}
	seen := map[uint64]struct{}{}
	next := 0
	for next < newURLSeen {
		es := make([]frontier.Entry, 0, 20_000)
		for range 20_000 {
			es = append(es, url(next))
			seen[Fingerprint(url(next).URL)] = struct{}{}
			next++
		}
		if _, err := s.Add(ctx, es); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := s.heartbeat(ctx); err != nil {
		b.Fatal(err)
	}
	o, ok, err := s.Acquire(ctx, time.Now(), PartitionOf(host, s.Partitions()))
	if err != nil || !ok {
		b.Fatalf("acquire: %v %v", ok, err)
	}
	var ls []Lease
	for len(ls) < newURLPages {
		got, _, err := s.TakeN(ctx, o, host, 256)
		if err != nil || len(got) == 0 {
			b.Fatalf("take: %d leases, %v", len(got), err)
		}
		ls = append(ls, got...)
	}
	ls = ls[:newURLPages]
	sn := 0
	var batches [][]Done
	for i := 0; i < len(ls); i += newURLBatch {
		var ds []Done
		for _, l := range ls[i : i+newURLBatch] {
			links := make([]frontier.Entry, 0, newURLLinks)
			for range newURLNew {
				links = append(links, url(next))
				next++
			}
			for len(links) < newURLLinks {
				links = append(links, url(sn%newURLSeen))
				sn += 7919
			}
			ds = append(ds, Done{Lease: l, Result: frontier.Result{Kind: frontier.Fetched, Links: links}})
		}
		batches = append(batches, ds)
	}
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	cpu0 := redisCPU(b, rdb)
	b.ResetTimer()
	for _, ds := range batches {
		in, err := s.protoCompleteBatch(ctx, o, ds, seen)
		if err != nil {
			b.Fatal(err)
		}
		for _, ok := range in {
			if !ok {
				b.Fatal("a leased URL was not in flight")
			}
		}
	}
	b.StopTimer()
	cpu := redisCPU(b, rdb) - cpu0
	newURLs := float64(newURLPages * newURLNew)
	if n, err := rdb.StrLen(ctx, s.k.part(o.Partition, "sl")).Result(); err != nil || n != 8*newURLPages*newURLNew {
		b.Fatalf("seen log holds %d bytes (%v)", n, err)
	}
	b.Logf("%d pages in batches of %d, %d links each, %d new, over %d seen: Redis CPU %.2f µs per new URL (%.3f ms per page)",
		newURLPages, newURLBatch, newURLLinks, newURLNew, newURLSeen, cpu.Seconds()*1e6/newURLs, cpu.Seconds()*1e3/newURLPages)
	b.ReportMetric(cpu.Seconds()*1e6/newURLs, "redis-CPU-µs/new-URL")
}
