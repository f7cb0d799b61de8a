package storage

import (
	"testing"
	"time"

	"go.etcd.io/bbolt"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func TestSampleRoundTrip(t *testing.T) {
	db, _ := newTestDB(t)
	s := Sample{
		At: t0.Add(1500 * time.Millisecond), Span: time.Second,
		Rate: 12.5, Limit: 10, Accepted: 9.75, Window: 3, InFlight: 2, Queued: 40, Hosts: 0,
		Requests: 11, Pages: 9, OverLimit: 2, Retries: 2, Errors: 1,
		P50: 3 * time.Millisecond, P95: 17 * time.Millisecond, PausedUntil: t0.Add(4 * time.Second),
	}
	if err := db.AddSamples(map[string]Sample{"a.example": s, CrawlWide: {At: t0}}); err != nil {
		t.Fatal(err)
	}
	got, err := db.Samples("a.example")
	if err != nil || len(got) != 1 {
		t.Fatalf("Samples = %v, %v; want one", got, err)
	}
	if !got[0].At.Equal(s.At) || !got[0].PausedUntil.Equal(s.PausedUntil) {
		t.Errorf("times = %v, %v; want %v, %v", got[0].At, got[0].PausedUntil, s.At, s.PausedUntil)
	}
	got[0].At, got[0].PausedUntil, s.At, s.PausedUntil = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	if got[0] != s {
		t.Errorf("round trip:\n got %+v\nwant %+v", got[0], s)
	}
	keys, err := db.SampleSeries()
	if err != nil || len(keys) != 2 || keys[0] != CrawlWide || keys[1] != "a.example" {
		t.Errorf("SampleSeries = %q, %v; want [* a.example]", keys, err)
	}
	if none, err := db.Samples("nobody"); err != nil || len(none) != 0 {
		t.Errorf("Samples(unknown) = %v, %v; want none", none, err)
	}

	// A store written before samples existed has no bucket: read-only readers see nothing.
	db2, _ := newTestDB(t)
	if keys, err := db2.SampleSeries(); err != nil || len(keys) != 0 {
		t.Errorf("fresh store: SampleSeries = %q, %v", keys, err)
	}
}

func TestMergeSamples(t *testing.T) {
	a := Sample{At: t0.Add(time.Second), Span: time.Second, Rate: 10, Requests: 1, P50: 10 * time.Millisecond, P95: 20 * time.Millisecond, OverLimit: 1}
	b := Sample{At: t0.Add(4 * time.Second), Span: 3 * time.Second, Rate: 2, Requests: 3, P50: 2 * time.Millisecond, P95: 5 * time.Millisecond, Retries: 2,
		PausedUntil: t0.Add(9 * time.Second)}
	cases := []struct {
		name string
		a, b Sample
		want Sample
	}{
		{"weighted", a, b, Sample{At: b.At, Span: 4 * time.Second, Rate: 4, Requests: 4, P50: 4 * time.Millisecond,
			P95: 20 * time.Millisecond, OverLimit: 1, Retries: 2, PausedUntil: b.PausedUntil}},
		{"instants keep the later figures", Sample{At: t0, Rate: 1}, Sample{At: t0, Rate: 7}, Sample{At: t0, Rate: 7}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := mergeSamples(tc.a, tc.b); !sameSample(got, tc.want) {
				t.Errorf("merge:\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func sameSample(a, b Sample) bool {
	ok := a.At.Equal(b.At) && a.PausedUntil.Equal(b.PausedUntil)
	a.At, a.PausedUntil, b.At, b.PausedUntil = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	return ok && a == b
}

// TestSamplesBounded adds far more samples than a series keeps: the series stays within
// MaxSamples at one uniform resolution, and nothing is lost from the totals.
func TestSamplesBounded(t *testing.T) {
	db, _ := newTestDB(t)
	const n = 2*MaxSamples + 100
	wantReq := 0
	for i := range n {
		s := Sample{At: t0.Add(time.Duration(i+1) * time.Second), Span: time.Second, Rate: float64(i % 10), Requests: i % 7, OverLimit: i % 3}
		wantReq += s.Requests
		if err := db.AddSamples(map[string]Sample{"h": s}); err != nil {
			t.Fatal(err)
		}
		if i == MaxSamples-1 {
			got, _ := db.Samples("h")
			if len(got) != MaxSamples {
				t.Fatalf("after %d samples the series holds %d; want all of them", MaxSamples, len(got))
			}
		}
	}
	got, err := db.Samples("h")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) > MaxSamples || len(got) < MaxSamples/4 {
		t.Fatalf("series holds %d samples; want between %d and %d", len(got), MaxSamples/4, MaxSamples)
	}
	var span time.Duration
	req := 0
	for i, s := range got {
		span += s.Span
		req += s.Requests
		if i > 0 && !s.At.After(got[i-1].At) {
			t.Fatalf("samples out of order at %d: %v after %v", i, s.At, got[i-1].At)
		}
	}
	if span != n*time.Second || req != wantReq {
		t.Errorf("totals after downsampling: span %v, requests %d; want %v, %d", span, req, n*time.Second, wantReq)
	}
	res, count := time.Duration(0), 0
	db.bolt.View(func(tx *bbolt.Tx) error {
		res, count = seriesMeta(tx.Bucket(bucketSampleMeta), "h")
		return nil
	})
	if count != len(got) || res < MinResolution {
		t.Errorf("meta: resolution %v, count %d; want ≥ %v, %d", res, count, MinResolution, len(got))
	}
	// Uniform resolution: every slot but the first and the newest holds the 1 s samples that
	// fall into one slot of width res: res/1s of them, rounded down or up.
	for _, s := range got[1 : len(got)-1] {
		if s.Span < res-time.Second || s.Span > res+time.Second {
			t.Fatalf("a sample covers %v; want within 1s of the resolution %v", s.Span, res)
		}
	}
	t.Logf("%d samples kept at resolution %v", len(got), res)
}
