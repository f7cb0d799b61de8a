package frontier

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"
)

// TestSeenSetAnswers drives a seenSet through claims, placements, commits, rollbacks and merges
// against a map, and checks every answer and every place.
func TestSeenSetAnswers(t *testing.T) {
	for _, limit := range []int{1 << 30, 5000} {
		t.Run(fmt.Sprintf("limit=%d", limit), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			initial := make([]uint64, 3000)
			model := make(map[uint64]bool)
			for i := range initial {
				initial[i] = rng.Uint64()
				model[initial[i]] = true
			}
			s := newSeenSet(limit)
			for _, fp := range initial {
				s.add(fp)
			}
			s.sorted(nil)
			locs := make(map[uint64]uint32) // committed with a place in bucketRecords
			next := uint32(0)
			for round := range 200 {
				placed := make(map[uint64]uint32) // in this round
				c := &claims{set: s}
				var fps []uint64
				for range 200 {
					fp := rng.Uint64() >> uint(rng.IntN(3)) // some fingerprints in the low slots
					if rng.IntN(4) == 0 {
						fp = initial[rng.IntN(len(initial))]
					}
					fps = append(fps, fp)
					got := s.lookup(fp)
					switch {
					case model[fp] && got != answerSeen:
						t.Fatalf("round %d: committed %x answered %d", round, fp, got)
					case !model[fp] && got == answerSeen:
						t.Fatalf("round %d: unknown %x answered seen", round, fp)
					case !model[fp] && got == answerNew && s.state == setPartial:
						t.Fatalf("round %d: a partial set answered new", round)
					}
					if got != answerSeen {
						s.claim(fp)
						c.fps = append(c.fps, fp)
						if a := s.lookup(fp); a != answerAsk {
							t.Fatalf("pending %x answered %d, want ask", fp, a)
						}
						if rng.IntN(2) == 0 && s.roomy() {
							next++
							s.placed([]fpLoc{{fp, next}})
							placed[fp] = next
							if loc, ok := s.locate(fp); !ok || loc != next {
								t.Fatalf("pending %x placed at %d is located at %d, %v", fp, next, loc, ok)
							}
						}
					}
				}
				commit := rng.IntN(3) > 0
				if commit {
					for _, fp := range c.fps {
						model[fp] = true
					}
					c.done(nil)
					maps.Copy(locs, placed)
				} else {
					c.reset()
					for fp := range placed {
						if loc, ok := s.locate(fp); ok {
							t.Fatalf("round %d: rolled back %x is located at %d", round, fp, loc)
						}
					}
				}
				for fp, want := range locs {
					if loc, ok := s.locate(fp); !ok || loc != want {
						t.Fatalf("round %d: %x placed at %d is located at %d, %v", round, fp, want, loc, ok)
					}
				}
				if len(s.pending) != 0 {
					t.Fatalf("round %d: %d fingerprints still pending", round, len(s.pending))
				}
				for _, fp := range fps {
					if s.state == setComplete && model[fp] != s.holds(fp) {
						t.Fatalf("round %d: holds(%x) = %v, committed %v", round, fp, !model[fp], model[fp])
					}
				}
			}
			if n := s.size(); limit > len(model) && n != len(model) {
				t.Errorf("set holds %d fingerprints, %d committed", n, len(model))
			} else if limit < len(model) && (n != limit || s.state != setPartial) {
				t.Errorf("bounded set holds %d fingerprints (state %d), bound %d", n, s.state, limit)
			}
		})
	}
}

// TestSeenSetBound crawls with a seen-set bounded to a few URLs: past the bound, URLs are
// checked on disk, and none is enqueued twice.
func TestSeenSetBound(t *testing.T) {
	tf := &testFrontier{t: t, dir: t.TempDir(), opts: &Options{SeenInMemory: 4}}
	tf.open()
	t.Cleanup(func() { tf.check(); tf.db.Close() })
	if n := tf.add("http://a/1", "http://a/2", "http://a/3"); n != 3 {
		t.Fatalf("added %d, want 3", n)
	}
	if n := tf.add("http://a/1", "http://a/4", "http://a/5", "http://a/6"); n != 3 {
		t.Fatalf("added %d, want 3", n)
	}
	if n := tf.add("http://a/2", "http://a/5", "http://a/6", "http://a/7"); n != 1 {
		t.Fatalf("added %d of 3 seen and 1 new, want 1", n)
	}
	tf.reopen()
	if n := tf.add("http://a/6", "http://a/7", "http://a/8"); n != 1 {
		t.Fatalf("after reopen: added %d, want 1", n)
	}
	if c := tf.Counts(); c.Queued != 8 {
		t.Errorf("%d queued, want 8", c.Queued)
	}
}

// TestLoadSeenInChunks reopens stores (the fixture upgraded) whose records take several of
// loadSeen's transactions: Check (at each reopen) finds every record in the set; with a bound
// the set is partial (holding the appended records past it) and still answers right.
func TestLoadSeenInChunks(t *testing.T) {
	defer func(n int) { loadChunk = n }(loadChunk)
	loadChunk = 3
	tf := &testFrontier{t: t, dir: fixtureStore(t, nil)}
	tf.open()
	t.Cleanup(func() { tf.check(); tf.db.Close() })
	for i := range 10 {
		tf.add(fmt.Sprintf("http://a.example/n%d", i))
	}
	tf.reopen()
	if n, want := tf.seen.size(), 10+len(fixtureStates); n != want {
		t.Errorf("set of %d fingerprints, want %d", n, want)
	}
	tf.opts = &Options{SeenInMemory: 7}
	tf.reopen()
	// The 10 appended records are held past the bound (they are found through the set); the
	// fixture's, in bucketURLs, are not.
	if tf.seen.size() != 10 || tf.seen.state != setPartial {
		t.Errorf("bounded set: %d fingerprints, state %d", tf.seen.size(), tf.seen.state)
	}
	if n := tf.add("http://a.example/n3", "http://a.example/q1", "http://a.example/n10"); n != 1 {
		t.Errorf("added %d of 2 seen URLs and a new one", n)
	}
}
