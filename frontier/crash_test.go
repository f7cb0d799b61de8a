package frontier

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crawl-project/crawl/storage"
)

// The crash test's web: page n (0 <= n < crashN) is on host h(n%5) and links to pages 2n+1 and
// 2n+2 and, if n%3 == 0, to an out-of-scope URL that is excluded. Its outcome depends only on n:
// n%7 == 3 fails, n%11 == 5 is excluded by robots, n%13 == 4 is retried twice before it is
// fetched, the rest are fetched.
const crashN = 1200

func crashURL(n int) string { return fmt.Sprintf("http://h%d/%d", n%5, n) }

func crashOutcome(n, attempts int) Kind {
	switch {
	case n%7 == 3:
		return Failed
	case n%11 == 5:
		return Excluded
	case n%13 == 4 && attempts < 2:
		return Retry
	}
	return Fetched
}

func crashResult(l Lease, now time.Time) Result {
	var n int
	fmt.Sscanf(l.URL[strings.LastIndexByte(l.URL, '/')+1:], "%d", &n)
	switch crashOutcome(n, l.Attempts) {
	case Failed:
		return Result{Kind: Failed, Status: 500, Reason: "http-status", Detail: "500"}
	case Excluded:
		return Result{Kind: Excluded, Reason: ReasonRobots, Detail: "Disallow: /"}
	case Retry:
		return Result{Kind: Retry, Reason: "503", NotBefore: now.Add(2 * time.Millisecond)}
	}
	r := Result{Kind: Fetched, Page: &storage.Page{URL: l.URL, Status: 200, Body: []byte(strings.Repeat(l.URL, 20))}}
	for _, c := range []int{2*n + 1, 2*n + 2} {
		if c < crashN {
			r.Links = append(r.Links, Entry{URL: crashURL(c), Host: fmt.Sprintf("h%d", c%5), Depth: l.Depth + 1, Parent: l.URL})
		}
	}
	if n%3 == 0 {
		r.Excluded = []Exclusion{{Entry: Entry{URL: fmt.Sprintf("http://x/%d", n), Host: "x", Parent: l.URL}, Reason: ReasonScope}}
	}
	return r
}

// crashExpected returns the final state of every URL of the crash web once it is crawled out.
func crashExpected() map[string]string {
	want := map[string]string{"http://x/seed": "excluded"}
	queue := []int{0}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		k := crashOutcome(n, 2)
		want[crashURL(n)] = k.String()
		if k != Fetched {
			continue
		}
		for _, c := range []int{2*n + 1, 2*n + 2} {
			if c < crashN {
				queue = append(queue, c)
			}
		}
		if n%3 == 0 {
			want[fmt.Sprintf("http://x/%d", n)] = "excluded"
		}
	}
	return want
}

const crashEnv = "FRONTIER_CRASH_HELPER_DIR"

// TestHelperProcess is the crawl that TestCrashKill kills: it is only run as a child process.
func TestHelperProcess(t *testing.T) {
	dir := os.Getenv(crashEnv)
	if dir == "" {
		t.Skip("child process of TestCrashKill")
	}
	db, err := storage.Open(dir, &storage.Options{Timeout: 5 * time.Second})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	f, err := Open(db, nil)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	if _, err := f.Add([]Entry{{URL: crashURL(0), Host: "h0"}}); err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	if err := f.Exclude([]Exclusion{{Entry: Entry{URL: "http://x/seed", Host: "x"}, Reason: ReasonScope}}); err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	var out sync.Mutex
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				now := time.Now()
				hosts := f.ReadyHosts(now)
				if len(hosts) == 0 {
					if f.Idle() {
						return
					}
					time.Sleep(time.Millisecond) // a test helper polling; library code never sleeps
					continue
				}
				l, ok, err := f.Lease(now, hosts[(w+i)%len(hosts)])
				if err != nil {
					fmt.Println("error", err)
					os.Exit(2)
				}
				if !ok {
					continue
				}
				r := crashResult(l, now)
				if err := f.Complete(l, r); err != nil {
					fmt.Println("error", err)
					os.Exit(2)
				}
				out.Lock()
				fmt.Println("done", l.URL, r.Kind) // reaches the parent only after the commit
				out.Unlock()
			}
		}()
	}
	wg.Wait()
	fmt.Println("idle")
	select {} // wait to be killed
}

// TestCrashKill runs a crawl in a child process, kills it with SIGKILL at a random moment,
// reopens the store and checks that every completion the child reported is on disk, that each
// fetched URL's links were committed with it, and that the invariants hold; three times, then
// finishes the crawl and compares every URL's final state with the expected one.
func TestCrashKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	dir := t.TempDir()
	reported := make(map[string]string) // URL -> kind the child reported after Complete returned

	for round := range 4 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
		cmd.Env = append(os.Environ(), crashEnv+"="+dir)
		cmd.Stderr = os.Stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		first := make(chan struct{})
		lines := make(chan []string, 1)
		go func() {
			var got []string
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				if len(got) == 0 {
					close(first)
				}
				got = append(got, sc.Text())
			}
			if len(got) == 0 {
				close(first)
			}
			lines <- got
		}()
		<-first
		killAfter := time.Duration(10+rng.IntN(350)) * time.Millisecond
		time.Sleep(killAfter) // the random moment of the crash
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		cmd.Wait()
		done := 0
		for _, line := range <-lines {
			f := strings.Fields(line)
			switch {
			case len(f) == 3 && f[0] == "done":
				reported[f[1]] = f[2]
				done++
			case line == "idle":
			default:
				t.Fatalf("child: %s", line)
			}
		}
		t.Logf("round %d: killed after %v, %d completions reported", round, killAfter, done)
		checkAfterCrash(t, dir, reported, false)
	}
	checkAfterCrash(t, dir, reported, true)
}

// checkAfterCrash reopens the store in dir and checks it against what the child reported; with
// finish, it also crawls the rest and compares the final states with crashExpected.
func checkAfterCrash(t *testing.T, dir string, reported map[string]string, finish bool) {
	t.Helper()
	db, err := storage.Open(dir, &storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	f, err := Open(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Check(); err != nil {
		t.Fatal(err)
	}
	for url, kind := range reported {
		s, ok, err := f.State(url)
		if err != nil || !ok {
			t.Fatalf("%s reported %s, not on disk: %v", url, kind, err)
		}
		if kind != "retry" && s.State != kind || kind == "retry" && s.Attempts == 0 {
			t.Errorf("%s reported %s, state on disk %+v", url, kind, s)
		}
	}
	pages := 0
	err = db.PagesMeta(func(p *storage.Page) error {
		pages++
		s, _, err := f.State(p.URL)
		if err != nil || s.State != "fetched" || s.PageSeq != p.Seq {
			t.Errorf("page %d %s: URL state %+v, %v", p.Seq, p.URL, s, err)
		}
		var n int
		fmt.Sscanf(p.URL[strings.LastIndexByte(p.URL, '/')+1:], "%d", &n)
		for _, c := range []int{2*n + 1, 2*n + 2} {
			if _, ok, _ := f.State(crashURL(c)); c < crashN && !ok {
				t.Errorf("%s fetched but its link %s was lost", p.URL, crashURL(c))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if c := f.Counts(); pages != c.Fetched {
		t.Errorf("%d pages stored, %d URLs fetched", pages, c.Fetched)
	}
	if !finish {
		return
	}
	now := time.Now()
	for !f.Idle() {
		hosts := f.ReadyHosts(now)
		if len(hosts) == 0 {
			next := f.NextAt(now)
			if next.IsZero() {
				t.Fatalf("not idle, nothing ready or delayed: %+v", f.Counts())
			}
			now = next // a fake clock: jump to the next retry
			continue
		}
		for _, h := range hosts {
			l, ok, err := f.Lease(now, h)
			if err != nil || !ok {
				t.Fatalf("Lease(%s): %v, %v", h, ok, err)
			}
			if err := f.Complete(l, crashResult(l, now)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := f.Check(); err != nil {
		t.Fatal(err)
	}
	want := crashExpected()
	for url, st := range want {
		s, ok, err := f.State(url)
		if err != nil || !ok || s.State != st {
			t.Errorf("%s: state %+v (%v, %v), want %s", url, s, ok, err, st)
		}
	}
	c := f.Counts()
	if total := c.Queued + c.Fetched + c.Failed + c.Excluded; total != len(want) {
		t.Errorf("%d URLs known, want %d: %+v", total, len(want), c)
	}
}
