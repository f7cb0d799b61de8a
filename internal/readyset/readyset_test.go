package readyset

import (
	"slices"
	"testing"
	"time"
)

// A host comes out of Take once each time it becomes ready, in order; a wait makes it ready at
// its time, and a later change of the host makes the wait stale.
func TestSet(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	var s Set
	type step struct {
		name string
		do   func()
		now  time.Time
		take []string
		next time.Time
	}
	steps := []step{
		{name: "empty", do: func() {}, now: t0},
		{name: "ready twice comes out once", do: func() { s.Ready("a"); s.Ready("b"); s.Ready("a") }, now: t0, take: []string{"a", "b"}},
		{name: "still ready comes out no more", do: func() { s.Ready("a") }, now: t0},
		{name: "waits", do: func() { s.Wait("a", at(20)); s.Wait("b", at(10)) }, now: at(5), next: at(10)},
		{name: "b's time came", do: func() {}, now: at(10), take: []string{"b"}, next: at(20)},
		{name: "a waits again: the first wait is stale", do: func() { s.Wait("a", at(40)) }, now: at(30), next: at(40)},
		{name: "idle hosts do not come back by time", do: func() { s.Idle("a") }, now: at(50)},
		{name: "idle then ready comes out", do: func() { s.Ready("a") }, now: at(50), take: []string{"a"}},
		{name: "forgotten waits are stale", do: func() { s.Wait("c", at(60)); s.Forget("c") }, now: at(70)},
	}
	for _, st := range steps {
		st.do()
		if got := s.Take(st.now); !slices.Equal(got, st.take) {
			t.Errorf("%s: Take = %v, want %v", st.name, got, st.take)
		}
		if next := s.NextWait(); !next.Equal(st.next) {
			t.Errorf("%s: NextWait = %v, want %v", st.name, next, st.next)
		}
	}
	if s.State("a") != Ready || s.State("b") != Ready || s.State("c") != Unknown || !s.IsReady("a") {
		t.Errorf("states a %v b %v c %v; want ready, ready, unknown", s.State("a"), s.State("b"), s.State("c"))
	}
	s.Ready("d")
	all := s.TakeAll()
	slices.Sort(all)
	if !slices.Equal(all, []string{"a", "b", "d"}) || s.Take(at(80)) != nil {
		t.Errorf("TakeAll = %v, then Take gave hosts; want [a b d], then none", all)
	}
	n := 0
	for range s.All() {
		n++
	}
	if n != s.Len() || n != 3 {
		t.Errorf("All yielded %d hosts, Len %d; want 3", n, s.Len())
	}
}
