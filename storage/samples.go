package storage

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"sort"
	"time"

	"go.etcd.io/bbolt"
)

// MaxSamples is the most samples one series keeps.
//
// Samples are the per-host time series `crawl report` draws: what each host's controller chose
// and what the host answered, a few figures per interval of the crawl (about one per second
// while the host is active). The crawl loop appends them; the report reads them.
//
// Each series has a resolution: samples whose times fall into the same slot of that width
// (aligned to the Unix epoch) are merged into one. The resolution starts at zero (every sample
// kept); when a series grows past MaxSamples, its resolution doubles (from MinResolution) until
// the merged series holds at most 3/4 of MaxSamples, and the whole series is rewritten at the
// new resolution. A long crawl so keeps its whole history at a uniform, coarser resolution, in
// at most MaxSamples × about 140 bytes per series, and the rewrites cost O(1) amortized per
// sample. Since the crawl loop writes a sample only for hosts that had a request in flight or
// finished one in the interval, a crawl never holds more samples than requests made plus hosts
// × intervals with a request in flight.
const MaxSamples = 1024

// MinResolution is the first slot width a series is merged at when it overflows.
const MinResolution = 100 * time.Millisecond

// CrawlWide is the series key of the figures of the whole crawl (all hosts together). It can
// never be a host key.
const CrawlWide = "*"

var (
	bucketSamples    = []byte("samples")    // series key -> sub-bucket: slot key -> sample record
	bucketSampleMeta = []byte("samplemeta") // series key -> resolution (8 bytes) + count (8 bytes)
)

// sampleVersion is the first byte of every stored sample record.
const sampleVersion = 1

// Sample is one series' figures over one interval of the crawl. For a host, the gauges are the
// host's gate at the end of the interval and the counts are the host's requests; for the
// CrawlWide series, Queued, InFlight and Hosts are the whole crawl's and the counts are summed
// over all hosts (the per-host gauges are zero).
//
// When samples are merged (see the package notes on bounded size), At is the later end, Span
// the sum, counts are summed, gauges become span-weighted means, P50 the request-weighted mean,
// P95 and PausedUntil the largest.
type Sample struct {
	At   time.Time     // end of the interval
	Span time.Duration // length of the interval (0 for the first sample of a run)

	// Gauges at the end of the interval (InFlight excepted).
	Rate     float64 // requests/s the host's controller allows
	Limit    float64 // requests/s the host is paced at: Rate capped by its robots.txt Crawl-delay
	Accepted float64 // successful replies/s the controller measured
	Window   float64 // concurrency window
	InFlight float64 // mean requests in flight over the interval: time taken by the requests that ended in it / Span
	Queued   float64 // URLs queued, including those waiting for a retry
	Hosts    float64 // CrawlWide only: hosts with a request in flight or finished in the interval

	// Counts over the interval.
	Requests  int // requests that ended, robots.txt included
	Pages     int // URLs that became fetched
	OverLimit int // 429 and 503 replies
	Retries   int // retries scheduled
	Errors    int // requests that ended without a response, or with a 5xx other than 503

	P50, P95    time.Duration // latency of the requests that ended in the interval (0 if none)
	PausedUntil time.Time     // the host was paused (Retry-After) until then; zero if not paused
}

// sampleRecord is Sample's fixed-size on-disk form (big-endian, after a version byte).
type sampleRecord struct {
	At, Span                                        int64
	Rate, Limit, Accepted, Window, InFlight, Queued float64
	Hosts                                           float64
	Requests, Pages, OverLimit, Retries, Errors     int64
	P50, P95, PausedUntil                           int64
}

func encodeSample(s Sample) ([]byte, error) {
	r := sampleRecord{
		At: s.At.UnixNano(), Span: int64(s.Span),
		Rate: s.Rate, Limit: s.Limit, Accepted: s.Accepted, Window: s.Window, InFlight: s.InFlight,
		Queued: s.Queued, Hosts: s.Hosts,
		Requests: int64(s.Requests), Pages: int64(s.Pages), OverLimit: int64(s.OverLimit),
		Retries: int64(s.Retries), Errors: int64(s.Errors),
		P50: int64(s.P50), P95: int64(s.P95),
	}
	if !s.PausedUntil.IsZero() {
		r.PausedUntil = s.PausedUntil.UnixNano()
	}
	return binary.Append([]byte{sampleVersion}, binary.BigEndian, &r)
}

func decodeSample(b []byte) (Sample, error) {
	var r sampleRecord
	if len(b) == 0 || b[0] != sampleVersion {
		return Sample{}, fmt.Errorf("%w (sample record of unknown version)", ErrNotStore)
	}
	if _, err := binary.Decode(b[1:], binary.BigEndian, &r); err != nil {
		return Sample{}, fmt.Errorf("%w (bad sample record: %v)", ErrNotStore, err)
	}
	s := Sample{
		At: time.Unix(0, r.At), Span: time.Duration(r.Span),
		Rate: r.Rate, Limit: r.Limit, Accepted: r.Accepted, Window: r.Window, InFlight: r.InFlight,
		Queued: r.Queued, Hosts: r.Hosts,
		Requests: int(r.Requests), Pages: int(r.Pages), OverLimit: int(r.OverLimit),
		Retries: int(r.Retries), Errors: int(r.Errors),
		P50: time.Duration(r.P50), P95: time.Duration(r.P95),
	}
	if r.PausedUntil != 0 {
		s.PausedUntil = time.Unix(0, r.PausedUntil)
	}
	return s, nil
}

// mergeSamples merges b into a (a's interval normally comes first).
func mergeSamples(a, b Sample) Sample {
	m := b
	if a.At.After(b.At) {
		m.At = a.At
	}
	m.Span = a.Span + b.Span
	wa, wb := float64(a.Span), float64(b.Span)
	if wa+wb == 0 {
		wa, wb = 0, 1 // two instants: keep the later figures
	}
	mean := func(x, y float64) float64 { return (x*wa + y*wb) / (wa + wb) }
	m.Rate, m.Limit, m.Accepted = mean(a.Rate, b.Rate), mean(a.Limit, b.Limit), mean(a.Accepted, b.Accepted)
	m.Window, m.InFlight = mean(a.Window, b.Window), mean(a.InFlight, b.InFlight)
	m.Queued, m.Hosts = mean(a.Queued, b.Queued), mean(a.Hosts, b.Hosts)
	m.Requests = a.Requests + b.Requests
	m.Pages = a.Pages + b.Pages
	m.OverLimit = a.OverLimit + b.OverLimit
	m.Retries = a.Retries + b.Retries
	m.Errors = a.Errors + b.Errors
	if m.Requests > 0 {
		m.P50 = time.Duration((float64(a.P50)*float64(a.Requests) + float64(b.P50)*float64(b.Requests)) / float64(m.Requests))
	}
	m.P95 = max(a.P95, b.P95)
	if a.PausedUntil.After(m.PausedUntil) {
		m.PausedUntil = a.PausedUntil
	}
	return m
}

// slotKey is the key of the slot t falls in at resolution res (t itself when res is 0).
func slotKey(t time.Time, res time.Duration) []byte {
	n := t.UnixNano()
	if res > 0 {
		n -= n % int64(res)
	}
	return binary.BigEndian.AppendUint64(nil, uint64(n))
}

// AddSamples appends one sample to each series in batch (keyed by host, or CrawlWide), in one
// transaction, merging and downsampling as the package notes on bounded size describe.
func (db *DB) AddSamples(batch map[string]Sample) error {
	err := db.Update(func(tx *bbolt.Tx) error {
		root, err := tx.CreateBucketIfNotExists(bucketSamples)
		if err != nil {
			return err
		}
		meta, err := tx.CreateBucketIfNotExists(bucketSampleMeta)
		if err != nil {
			return err
		}
		for key, s := range batch {
			if err := addSample(root, meta, key, s); err != nil {
				return fmt.Errorf("series %q: %w", key, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("storage: add samples in %s: %w", db.path, err)
	}
	return nil
}

func addSample(root, meta *bbolt.Bucket, key string, s Sample) error {
	if key == "" {
		return fmt.Errorf("empty series key")
	}
	b, err := root.CreateBucketIfNotExists([]byte(key))
	if err != nil {
		return err
	}
	res, count := seriesMeta(meta, key)
	k := slotKey(s.At, res)
	if v := b.Get(k); v != nil {
		old, err := decodeSample(v)
		if err != nil {
			return err
		}
		s = mergeSamples(old, s)
	} else {
		count++
	}
	v, err := encodeSample(s)
	if err != nil {
		return err
	}
	if err := b.Put(k, v); err != nil {
		return err
	}
	if count > MaxSamples {
		if res, count, err = downsample(root, key); err != nil {
			return err
		}
	}
	return putSeriesMeta(meta, key, res, count)
}

func seriesMeta(meta *bbolt.Bucket, key string) (res time.Duration, count int) {
	v := meta.Get([]byte(key))
	if len(v) != 16 {
		return 0, 0
	}
	return time.Duration(binary.BigEndian.Uint64(v)), int(binary.BigEndian.Uint64(v[8:]))
}

func putSeriesMeta(meta *bbolt.Bucket, key string, res time.Duration, count int) error {
	v := binary.BigEndian.AppendUint64(nil, uint64(res))
	v = binary.BigEndian.AppendUint64(v, uint64(count))
	return meta.Put([]byte(key), v)
}

// downsample rewrites series key at the coarsest needed resolution (see the package notes) and
// returns the new resolution and count.
func downsample(root *bbolt.Bucket, key string) (time.Duration, int, error) {
	all, err := readSeries(root.Bucket([]byte(key)))
	if err != nil {
		return 0, 0, err
	}
	res := time.Duration(0)
	if len(all) > 0 {
		// The resolution a series had is not needed: merging at a coarser one subsumes it.
		res = MinResolution / 2
	}
	var merged []Sample
	for {
		res *= 2
		merged = rebucket(all, res)
		if len(merged) <= MaxSamples*3/4 || res > math.MaxInt64/4 {
			break
		}
	}
	if err := root.DeleteBucket([]byte(key)); err != nil {
		return 0, 0, err
	}
	b, err := root.CreateBucket([]byte(key))
	if err != nil {
		return 0, 0, err
	}
	b.FillPercent = 1 // keys only ever grow
	for _, s := range merged {
		v, err := encodeSample(s)
		if err != nil {
			return 0, 0, err
		}
		if err := b.Put(slotKey(s.At, res), v); err != nil {
			return 0, 0, err
		}
	}
	return res, len(merged), nil
}

// rebucket merges samples (sorted by time) that share a slot of width res.
func rebucket(all []Sample, res time.Duration) []Sample {
	var out []Sample
	var last []byte
	for _, s := range all {
		k := slotKey(s.At, res)
		if len(out) > 0 && bytes.Equal(k, last) {
			out[len(out)-1] = mergeSamples(out[len(out)-1], s)
			continue
		}
		out, last = append(out, s), k
	}
	return out
}

func readSeries(b *bbolt.Bucket) ([]Sample, error) {
	if b == nil {
		return nil, nil
	}
	var out []Sample
	err := b.ForEach(func(_, v []byte) error {
		s, err := decodeSample(v)
		if err != nil {
			return err
		}
		out = append(out, s)
		return nil
	})
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out, err
}

// Samples returns the samples of one series (a host key, or CrawlWide), oldest first; none if
// the series does not exist.
func (db *DB) Samples(key string) ([]Sample, error) {
	var out []Sample
	err := db.View(func(tx *bbolt.Tx) error {
		root := tx.Bucket(bucketSamples)
		if root == nil {
			return nil
		}
		var err error
		out, err = readSeries(root.Bucket([]byte(key)))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("storage: samples %q in %s: %w", key, db.path, err)
	}
	return out, nil
}

// SampleSeries returns the keys of every series that holds samples, sorted.
func (db *DB) SampleSeries() ([]string, error) {
	var keys []string
	err := db.View(func(tx *bbolt.Tx) error {
		root := tx.Bucket(bucketSamples)
		if root == nil {
			return nil
		}
		return root.ForEachBucket(func(k []byte) error {
			keys = append(keys, string(k))
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("storage: sample series in %s: %w", db.path, err)
	}
	return keys, nil
}
