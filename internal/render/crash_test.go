//go:build linux

package render

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestCrashRestarts: the browser killed mid-render makes Render return ErrCrash; the browser
// is restarted, the next render works, and no process of the dead one is left.
func TestCrashRestarts(t *testing.T) {
	b := startBrowser(t, Options{Tabs: 1, Quiet: testQuiet, Timeout: 20 * time.Second})
	first := b.running()
	if err := renderSignalled(b, first.pid, syscall.SIGKILL); !errors.Is(err, ErrCrash) {
		t.Fatalf("Render = %v, want ErrCrash", err)
	}
	if ps := waitNoProcesses(first.profile, 5*time.Second); len(ps) > 0 {
		t.Errorf("processes %v of the killed browser are left", ps)
	}
	renderAfter(t, b, "crash")
	if b.running() == first || b.starts < 2 {
		t.Errorf("the browser was started %d times, want a restart", b.starts)
	}
}

// TestHungBrowser: a browser that stops answering (SIGSTOP) is taken for dead: ErrCrash, and
// a new browser renders the next page.
func TestHungBrowser(t *testing.T) {
	b := startBrowser(t, Options{Tabs: 1, Quiet: testQuiet, Timeout: 2 * time.Second})
	first := b.running()
	if err := renderSignalled(b, first.pid, syscall.SIGSTOP); !errors.Is(err, ErrCrash) {
		t.Fatalf("Render = %v, want ErrCrash", err)
	}
	renderAfter(t, b, "hang")
	if ps := waitNoProcesses(first.profile, 5*time.Second); len(ps) > 0 {
		t.Errorf("processes %v of the hung browser are left", ps)
	}
}

// renderSignalled renders a page whose script's request is held until the browser process
// pid has been sent sig, and returns Render's error.
func renderSignalled(b *Browser, pid int, sig syscall.Signal) error {
	inFlight := make(chan struct{}, 1)
	a := AnswererFunc(func(ctx context.Context, r *Request) (*Response, error) {
		select {
		case inFlight <- struct{}{}:
		default:
		}
		<-ctx.Done()
		return nil, ctx.Err()
	})
	go func() {
		<-inFlight
		syscall.Kill(pid, sig)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := b.Render(ctx, "http://site.test/", htmlDoc(`<script src="/a.js"></script>`), a)
	return err
}

// renderAfter checks that b renders a plain page after what (a crash, a hang) broke it.
func renderAfter(t *testing.T, b *Browser, what string) {
	t.Helper()
	res := render(t, b, "http://site.test/", htmlDoc(`<p>after</p>`), AnswererFunc(func(ctx context.Context, r *Request) (*Response, error) {
		return nil, errors.New("no")
	}))
	if !strings.Contains(string(res.DOM), "<p>after</p>") {
		t.Errorf("the render after the %s gave %s", what, res.DOM)
	}
}

// TestHungPage: a page whose script never yields gives ErrTimeout (no DOM could be read); the
// browser is still up and renders the next page.
func TestHungPage(t *testing.T) {
	b := startBrowser(t, Options{Tabs: 1, Quiet: testQuiet, Timeout: 2 * time.Second})
	first := b.running()
	no := AnswererFunc(func(ctx context.Context, r *Request) (*Response, error) { return nil, errors.New("no") })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := b.Render(ctx, "http://site.test/", htmlDoc(`<p>x</p><script>for (;;) {}</script>`), no)
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("Render = %v, want ErrTimeout", err)
	}
	renderAfter(t, b, "hung page")
	if b.running() != first {
		t.Errorf("the browser was restarted for a hung page")
	}
}

// waitNoProcesses waits up to d for no process to name s, and returns those left.
func waitNoProcesses(s string, d time.Duration) []int {
	deadline := time.Now().Add(d)
	for {
		ps := processesNaming(s)
		if len(ps) == 0 || time.Now().After(deadline) {
			return ps
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// procStat returns the state and process group of pid from /proc/pid/stat.
func procStat(pid int) (state string, pgid int, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", 0, false
	}
	// pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return "", 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 3 {
		return "", 0, false
	}
	pgid, err = strconv.Atoi(f[2])
	return f[0], pgid, err == nil
}

// processGroups returns the process groups of pids, other than this process's.
func processGroups(pids []int) map[int]bool {
	g := map[int]bool{}
	for _, p := range pids {
		if _, pgid, ok := procStat(p); ok && pgid > 1 && pgid != syscall.Getpgrp() {
			g[pgid] = true
		}
	}
	return g
}

// inGroups waits up to d for no live (not zombie) process to be in groups, and returns those
// left.
func inGroups(groups map[int]bool, d time.Duration) []int {
	deadline := time.Now().Add(d)
	for {
		var out []int
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			if state, pgid, ok := procStat(pid); ok && state != "Z" && groups[pgid] {
				out = append(out, pid)
			}
		}
		if len(out) == 0 || time.Now().After(deadline) {
			return out
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestTabsRecycled: a tab renders Options.TabPages pages, then is closed and another opened;
// a page that did not settle closes its tab; and the browser never holds more pages or
// browser contexts than Options.Tabs.
func TestTabsRecycled(t *testing.T) {
	b := startBrowser(t, Options{Tabs: 2, TabPages: 2, Quiet: testQuiet, MaxRequests: 1})
	in := b.running()
	var mu sync.Mutex
	sessions := map[string]int{} // pages rendered in each tab
	var order []string           // the tab of each page
	b.opened = func(s string) {
		mu.Lock()
		sessions[s]++
		order = append(order, s)
		mu.Unlock()
	}
	count := func() (pages, contexts int) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var ts struct {
			TargetInfos []struct {
				Type string `json:"type"`
			} `json:"targetInfos"`
		}
		if err := in.conn.call(ctx, "", "Target.getTargets", nil, &ts); err != nil {
			t.Fatal(err)
		}
		for _, ti := range ts.TargetInfos {
			if ti.Type == "page" {
				pages++
			}
		}
		var bc struct {
			IDs []string `json:"browserContextIds"`
		}
		if err := in.conn.call(ctx, "", "Target.getBrowserContexts", nil, &bc); err != nil {
			t.Fatal(err)
		}
		return pages, len(bc.IDs)
	}
	pages0, contexts0 := count()
	no := AnswererFunc(func(ctx context.Context, r *Request) (*Response, error) { return nil, errors.New("no") })
	done := make(chan error)
	for i := range 6 {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, err := b.Render(ctx, fmt.Sprintf("http://site.test/%d", i), htmlDoc(`<img src="/x.png"><p>p</p>`), no)
			done <- err
		}()
	}
	for range 6 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
	if pages, contexts := count(); pages > pages0+2 || contexts > contexts0+2 {
		t.Errorf("after 6 renders on 2 tabs: %d pages, %d browser contexts; before: %d, %d", pages, contexts, pages0, contexts0)
	}
	reused := false
	for s, n := range sessions {
		if n > 2 {
			t.Errorf("tab %s rendered %d pages, more than Options.TabPages", s, n)
		}
		reused = reused || n > 1
	}
	if !reused {
		t.Errorf("no tab rendered a second page: %v", sessions)
	}
	// a page cut by a cap closes its tab: no later page runs in it
	res := render(t, b, "http://site.test/cut", htmlDoc(`<img src="/x.png"><img src="/y.png"><p>p</p>`), no)
	if res.Cut != CutRequests {
		t.Fatalf("cut %v, want %v", res.Cut, CutRequests)
	}
	for i := range 3 {
		render(t, b, fmt.Sprintf("http://site.test/after/%d", i), htmlDoc(`<p>p</p>`), no)
	}
	cut := order[6]
	for _, s := range order[7:] {
		if s == cut {
			t.Errorf("a page ran in the tab of a page cut by a cap (tabs of the pages: %v)", order)
		}
	}
}

// TestKillNineLeavesNoBrowser re-executes the test binary as a child that starts a browser
// and renders a page that never ends, kills the child with SIGKILL, and checks that no
// process naming the child's profile directory is left a few seconds later. In "hung", the
// browser is stopped (SIGSTOP) when the child is killed, so it cannot notice its pipe closing:
// only the parent-death signal ends it.
func TestKillNineLeavesNoBrowser(t *testing.T) {
	for _, mode := range []string{"rendering", "hung"} {
		t.Run(mode, func(t *testing.T) { testKillNine(t, mode) })
	}
}

func testKillNine(t *testing.T, mode string) {
	browserPath(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestKillNineChild$", "-test.v")
	cmd.Env = append(os.Environ(), "RENDER_KILL9_CHILD="+mode)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var root string
	timeout := time.After(time.Minute)
	for root == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("the child ended before rendering")
			}
			if r, ok := strings.CutPrefix(l, "RENDERING "); ok {
				root = r
			}
		case <-timeout:
			t.Fatal("the child did not start rendering within a minute")
		}
	}
	defer os.RemoveAll(root) // a killed crawl cannot remove its profile
	named := processesNaming(root)
	if len(named) < 2 {
		t.Fatalf("the child's browser has %d processes naming %s, want several (browser, renderer, ...)", len(named), root)
	}
	groups := processGroups(named) // also its zygotes, which name nothing of their own
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	ps := waitNoProcesses(root, 10*time.Second)
	if len(ps) == 0 {
		ps = inGroups(groups, 5*time.Second)
	}
	if len(ps) == 0 {
		// The next Start removes the directory the killed crawl left.
		if _, err := os.Stat(root); err != nil {
			t.Fatalf("the killed crawl's directory %s: %v", root, err)
		}
		sweep(filepath.Dir(root))
		if _, err := os.Stat(root); !os.IsNotExist(err) {
			t.Errorf("sweep left the killed crawl's directory %s (%v)", root, err)
		}
	} else {
		var names []string
		for _, p := range ps {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
			names = append(names, fmt.Sprintf("%d %.120s", p, strings.ReplaceAll(string(b), "\x00", " ")))
			syscall.Kill(p, syscall.SIGKILL)
		}
		t.Errorf("10 s after kill -9 of the crawl, browser processes are left:\n%s", strings.Join(names, "\n"))
	}
}

// TestKillNineChild is the child of TestKillNineLeavesNoBrowser; it does nothing otherwise.
func TestKillNineChild(t *testing.T) {
	mode := os.Getenv("RENDER_KILL9_CHILD")
	if mode == "" {
		t.Skip("run by TestKillNineLeavesNoBrowser")
	}
	b, err := Start(context.Background(), Options{Tabs: 1, Timeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{}, 1)
	a := AnswererFunc(func(ctx context.Context, r *Request) (*Response, error) {
		select {
		case started <- struct{}{}:
		default:
		}
		<-ctx.Done()
		return nil, ctx.Err()
	})
	go b.Render(context.Background(), "http://site.test/", htmlDoc(`<p>x</p><script src="/never.js"></script>`), a)
	<-started
	if mode == "hung" {
		syscall.Kill(b.running().pid, syscall.SIGSTOP)
	}
	fmt.Printf("RENDERING %s\n", b.root)
	select {} // until killed
}
