package fleet

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// seenView is what a Store last knew of a partition's seen-set header: its bucket count n and
// member count urls. A script with a seen block (scripts.go, seenSet) checks it and answers
// STALE, with the header, when the buckets it was given do not cover the header it finds.
type seenView struct{ n, urls int }

// seenAttempts bounds the runs of one script that a stale view or a repaired header may take.
const seenAttempts = 8

// errSeenRace: the seen-set header changed under every one of seenAttempts runs.
var errSeenRace = errors.New("seen-set header kept changing under the script")

// seenViewOf is what s knows of partition p's header: a fresh one ({1, 0}) until a script
// says otherwise.
func (s *Store) seenViewOf(p int) seenView {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.seen[p]; ok {
		return v
	}
	return seenView{n: 1}
}

func (s *Store) setSeenView(p int, v seenView) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen == nil {
		s.seen = map[int]seenView{}
	}
	s.seen[p] = v
}

// readSeenViews reads the seen-set headers of partitions ps in one pipeline and keeps those
// that are in range as their views.
func (s *Store) readSeenViews(ctx context.Context, ps []int) error {
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.SliceCmd, len(ps))
	for i, p := range ps {
		cmds[i] = pipe.HMGet(ctx, s.k.seen(p), "n", "urls")
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.As(err, new(redis.Error)) {
		return err
	}
	for i, c := range cmds {
		v := c.Val()
		if len(v) != 2 {
			continue
		}
		if v[0] == nil && v[1] == nil {
			s.setSeenView(ps[i], seenView{n: 1})
			continue
		}
		n, err1 := strconv.ParseInt(fmt.Sprint(v[0]), 10, 64)
		u, err2 := strconv.ParseInt(fmt.Sprint(v[1]), 10, 64)
		if view, ok := seenViewFrom(n, u); ok && err1 == nil && err2 == nil {
			s.setSeenView(ps[i], view)
		}
	}
	return nil
}

// seenViewFrom reads a header from a script's reply (its last two integers), bounded as the
// scripts bound it; ok is false for values out of range.
func seenViewFrom(n, urls int64) (seenView, bool) {
	if n < 1 || n > seenMaxN || urls < 0 || urls > seenLoad*seenMaxN {
		return seenView{}, false
	}
	return seenView{n: int(n), urls: int(urls)}, true
}

// seenAnswer is what a script's error asks of its caller.
type seenAnswer int

const (
	seenOther   seenAnswer = iota // another error, or none
	seenStale                     // run again with the buckets of the header it gives
	seenDamaged                   // recount the header (repairSeen), then run again
)

// seenAnswerOf reads a script's error: STALE with the header it found, SEENDAMAGED, or another.
func seenAnswerOf(err error) (seenAnswer, seenView) {
	if err == nil {
		return seenOther, seenView{}
	}
	msg := strings.TrimPrefix(err.Error(), "ERR ")
	if msg == "SEENDAMAGED" {
		return seenDamaged, seenView{}
	}
	rest, ok := strings.CutPrefix(msg, "STALE ")
	if !ok {
		return seenOther, seenView{}
	}
	ns, us, _ := strings.Cut(rest, " ")
	n, err1 := strconv.ParseInt(ns, 10, 64)
	u, err2 := strconv.ParseInt(us, 10, 64)
	v, ok := seenViewFrom(n, u)
	if err1 != nil || err2 != nil || !ok {
		return seenDamaged, seenView{}
	}
	return seenStale, v
}

// seenSplits is the splits a script's seen block allows under view v for e members that may
// be new: enough for all of them, and slack more, at most seenMaxSplits.
func seenSplits(v seenView, e, slack int) int {
	need := (v.urls+e+seenLoad-1)/seenLoad - v.n
	return min(max(need, 0)+slack, seenMaxSplits, seenMaxN-v.n)
}

// seenSlackOf is the splits beyond its own that the next script of partition p allows: every
// one costs the script two more bucket keys, and is needed only if other workers split the
// partition between what s knew and the script's run. It is seenSlackMin, doubled (up to
// seenSlackMax) each time a script of p found the header beyond what it allowed (seenWiden),
// and one less each time one did not (seenFitted), down to seenSlackMin.
func (s *Store) seenSlackOf(p int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if k, ok := s.slack[p]; ok {
		return k
	}
	return seenSlackMin
}

func (s *Store) seenWiden(p int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.slack == nil {
		s.slack = map[int]int{}
	}
	s.slack[p] = min(2*max(s.slack[p], seenSlackMin), seenSlackMax)
}

func (s *Store) seenFitted(p int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if k, ok := s.slack[p]; ok {
		if k-1 <= seenSlackMin {
			delete(s.slack, p)
		} else {
			s.slack[p] = k - 1
		}
	}
}

// seenBlockBuckets is the buckets a seen block declares under view v allowing k splits, for
// the members whose seenHash are hs: each one's bucket under every count from v.n to v.n+k,
// the buckets each of those splits reads and makes, and bucket v.n-1, whose presence the
// script checks.
func seenBlockBuckets(v seenView, k int, hs []uint64) []int {
	set := map[int]bool{}
	if v.n > 1 {
		set[v.n-1] = true
	}
	for n := v.n; n < v.n+k; n++ {
		set[n] = true
		set[n-seenTop(n)] = true
	}
	// Under counts sharing one power of two a hash's bucket changes once at most: its buckets
	// over [v.n, v.n+k] are those at the ends of each such run.
	probes := []int{v.n, v.n + k}
	for pow := 2; pow <= v.n+k; pow *= 2 {
		if pow > v.n {
			probes = append(probes, pow-1, pow)
		}
	}
	for _, h := range hs {
		for _, n := range probes {
			set[seenBucket(h, n)] = true
		}
	}
	out := make([]int, 0, len(set))
	for b := range set {
		out = append(out, b)
	}
	slices.Sort(out)
	return out
}

// seenTop is the largest power of two not above n (n ≥ 1).
func seenTop(n int) int { return 1 << (bits.Len(uint(n)) - 1) }

// appendSeenBlock appends to keys and args the seen block (scripts.go, seenSet) of a script of
// partition p that may record the members whose seenHash are hs, under view v.
func (s *Store) appendSeenBlock(keys []string, args []any, p int, v seenView, hs []uint64) ([]string, []any) {
	k := seenSplits(v, len(hs), s.seenSlackOf(p))
	bs := seenBlockBuckets(v, k, hs)
	packed := make([]byte, 0, 4*len(bs))
	for _, b := range bs {
		keys = append(keys, s.k.bucket(p, b))
		packed = binary.LittleEndian.AppendUint32(packed, uint32(b))
	}
	return keys, append(args, v.n, k, len(bs), string(packed))
}

// repairSeen recounts partition p's seen-set header from its buckets, for a script that found
// it damaged: n is the first bucket from 0 that is empty (at least 1), urls the members of the
// buckets before it. The work follows what is stored. It writes them only if the header still
// holds what it read, and counts the repair in the partition's "repaired" counter.
func (s *Store) repairSeen(ctx context.Context, p int) error {
	old, err := s.rdb.HMGet(ctx, s.k.seen(p), "n", "urls").Result()
	if err != nil {
		return fmt.Errorf("fleet: repair seen-set of partition %d: %w", p, err)
	}
	n, urls := 0, 0
	for done := false; !done && n < seenMaxN; {
		pipe := s.rdb.Pipeline()
		cards := make([]*redis.IntCmd, 0, 1000)
		for b := n; b < min(n+1000, seenMaxN); b++ {
			cards = append(cards, pipe.SCard(ctx, s.k.bucket(p, b)))
		}
		if _, err := pipe.Exec(ctx); err != nil && !redis.HasErrorPrefix(err, "WRONGTYPE") {
			return fmt.Errorf("fleet: repair seen-set of partition %d: %w", p, err)
		}
		for _, c := range cards {
			if c.Val() == 0 { // empty, or not a set
				done = true
				break
			}
			urls += int(c.Val())
			n++
		}
	}
	text := func(v any) string {
		if s, ok := v.(string); ok {
			return s
		}
		return ""
	}
	err = repairSeenScript.Run(ctx, s.rdb, []string{s.k.seen(p), s.k.counts(p)}, text(old[0]), text(old[1]), max(n, 1), urls).Err()
	if err != nil {
		return fmt.Errorf("fleet: repair seen-set of partition %d: %w", p, err)
	}
	return nil
}
