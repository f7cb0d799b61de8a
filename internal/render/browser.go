package render

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Browser is one headless Chromium rendering up to Options.Tabs pages at once. It restarts
// the browser when it dies or hangs. Browser is safe for simultaneous use by multiple
// goroutines.
type Browser struct {
	o    Options
	path string
	root string       // temporary directory holding each started browser's profile
	trap net.Listener // the proxy every connection that escapes interception is sent to
	tabs chan struct{}

	escapes atomic.Int64         // connections that reached trap
	prelude string               // the page's prelude; tests clear it to reach what lies behind it
	opened  func(session string) // tests: called with each page's session once it is set up
	closing func()               // tests: called after each page, before its tab is readied or disposed of
	left    func(url string)     // tests: called with each request a page made as it left, failed by reset

	mu      sync.Mutex
	inst    *instance      // nil before the first start and after a failed restart
	free    []*tab         // tabs waiting for a page; at most Options.Tabs
	warming chan struct{}  // closed once the spare tab being opened (spare) waits in free or failed; nil: none
	resets  sync.WaitGroup // tabs being readied after a page whose result was returned
	starts  int
	closed  bool
}

// instance is one started browser process and its DevTools connection.
type instance struct {
	pid     int
	profile string
	conn    *conn
	stderr  *tail
	exited  chan struct{} // closed when the process has exited; exitErr is then set
	exitErr error
	dead    chan struct{} // closed once the process is killed or found dead
	once    sync.Once
}

const (
	startTimeout = 30 * time.Second // a browser's first answer on a loaded machine
	callTimeout  = 10 * time.Second // a DevTools command that must answer promptly
	grace        = 5 * time.Second  // reading the DOM after Timeout; the ping that tells a hung browser
)

// Start starts the browser. It returns ErrNoBrowser when Options.Browser is empty and none is
// on PATH, or when the one named cannot be found.
func Start(ctx context.Context, o Options) (*Browser, error) {
	o = o.withDefaults()
	path := o.Browser
	if path == "" {
		path = FindBrowser()
		if path == "" {
			return nil, ErrNoBrowser
		}
	} else if p, err := exec.LookPath(path); err != nil {
		return nil, fmt.Errorf("%w: %q: %v", ErrNoBrowser, path, err)
	} else {
		path = p
	}
	sweep(os.TempDir())
	root, err := os.MkdirTemp("", rootPrefix)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(root, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
		os.RemoveAll(root)
		return nil, err
	}
	trap, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		os.RemoveAll(root)
		return nil, err
	}
	b := &Browser{o: o, path: path, root: root, trap: trap, tabs: make(chan struct{}, o.Tabs), prelude: prelude + "\n" + settled}
	go b.refuse()
	b.mu.Lock()
	in, err := b.startLocked(ctx)
	b.mu.Unlock()
	if err != nil {
		b.Close()
		return nil, err
	}
	b.warm(ctx, in)
	return b, nil
}

// warm opens one tab in in and leaves it waiting for the next render, which would otherwise
// open it itself: opening a browser context and its first renderer is the costliest step of
// a page in a new tab, and a caller that starts the browser beside other work (the crawl
// fetching its seeds' robots.txt) gets it done meanwhile; Start warms one, spare the next
// ones. A tab that fails to open is disposed of; the render opens one as usual.
func (b *Browser) warm(ctx context.Context, in *instance) {
	p := newPage(b.o, in, nil, "", nil, nil, b.prelude)
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	t, err := p.openTab(cctx)
	p.c.unregister(p.sink)
	if err != nil {
		t.dispose(p.c)
		return
	}
	b.putTab(t)
}

const (
	rootPrefix = "crawl-render-" // the directory holding a Browser's profiles, in os.TempDir
	ownerFile  = "owner"         // in it: the process id of the crawl that made it
)

// sweep removes the directories of Browsers whose crawl was killed before it could remove
// them: those whose owner process is gone and that no process names any more.
func sweep(dir string) {
	ents, _ := filepath.Glob(filepath.Join(dir, rootPrefix+"*"))
	for _, d := range ents {
		b, err := os.ReadFile(filepath.Join(d, ownerFile))
		if err != nil {
			continue // not one of ours, or still being made
		}
		pid, err := strconv.Atoi(string(b))
		if err != nil || processAlive(pid) || len(processesNaming(d)) > 0 {
			continue
		}
		os.RemoveAll(d)
	}
}

// refuse closes every connection made to the trap proxy: the browser sends there whatever
// its request interception does not see (WebSockets, preconnects, a service worker's script),
// so nothing reaches the network.
func (b *Browser) refuse() {
	for {
		c, err := b.trap.Accept()
		if err != nil {
			return
		}
		b.escapes.Add(1)
		c.Close()
	}
}

// flags are the browser's command line apart from the profile and the trap proxy.
var flags = []string{
	"--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
	"--no-first-run", "--no-default-browser-check", "--disable-default-apps",
	"--disable-background-networking", "--disable-component-update", "--disable-sync",
	"--disable-extensions", "--disable-breakpad", "--disable-crash-reporter",
	"--disable-client-side-phishing-detection", "--safebrowsing-disable-auto-update",
	"--metrics-recording-only", "--password-store=basic", "--use-mock-keychain",
	"--disable-quic", "--dns-prefetch-disable", "--disable-dev-shm-usage",
	"--disable-features=NetworkPrediction,Prerender2,OptimizationHints,Translate,MediaRouter," +
		"DialMediaRouteProvider,AutofillServerCommunication,DnsOverHttps,InterestFeedContentSuggestions," +
		"CertificateTransparencyComponentUpdater,BackForwardCache,SpareRendererForSitePerProcess,RenderDocument",
	"--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
	"--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1", // no name resolves; the trap (an address) still connects
	"--disable-background-timer-throttling", "--disable-renderer-backgrounding",
	"--disable-backgrounding-occluded-windows", "--disable-hang-monitor",
	"--mute-audio", "--hide-scrollbars", "--window-size=1280,1024",
	"about:blank",
}

// startLocked starts a browser and makes it the current one, trying twice: a browser that
// dies while starting is a crash like any other. It requires b.mu held.
func (b *Browser) startLocked(ctx context.Context) (*instance, error) {
	in, err := b.launchLocked(ctx)
	if err != nil && ctx.Err() == nil {
		in, err = b.launchLocked(ctx)
	}
	return in, err
}

// launchLocked starts one browser. It requires b.mu held.
func (b *Browser) launchLocked(ctx context.Context) (*instance, error) {
	b.starts++
	profile, err := os.MkdirTemp(b.root, "profile-")
	if err != nil {
		return nil, err
	}
	args := append([]string{
		"--user-data-dir=" + profile,
		"--proxy-server=http://" + b.trap.Addr().String(),
		"--proxy-bypass-list=<-loopback>", // loopback goes to the trap too
		// logs go to stderr; the switch, which Chromium passes on to its renderer, GPU and
		// network processes, names the profile in their command lines (killTree)
		"--enable-logging=stderr", "--log-file=" + filepath.Join(profile, "browser.log"),
	}, flags...)
	cmd := exec.Command(b.path, args...)
	cmd.Env = append(os.Environ(), "HOME="+profile) // keep the browser's dot-files in the profile
	st := &tail{}
	cmd.Stdout, cmd.Stderr = st, st
	toR, toW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	fromR, fromW, err := os.Pipe()
	if err != nil {
		toR.Close()
		toW.Close()
		return nil, err
	}
	cmd.ExtraFiles = []*os.File{toR, fromW} // the browser's fd 3 and fd 4
	exited, err := startProcess(cmd)
	toR.Close()
	fromW.Close()
	if err != nil {
		toW.Close()
		fromR.Close()
		os.RemoveAll(profile)
		return nil, fmt.Errorf("starting %s: %w", b.path, err)
	}
	in := &instance{pid: cmd.Process.Pid, profile: profile, conn: newConn(toW, fromR), stderr: st,
		exited: make(chan struct{}), dead: make(chan struct{})}
	go func() {
		in.exitErr = <-exited
		close(in.exited)
	}()
	go in.watch()
	cctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	if err := in.conn.call(cctx, "", "Browser.getVersion", nil, nil); err != nil {
		in.kill()
		status := "still running"
		select {
		case <-in.exited:
			status = fmt.Sprint(in.exitErr)
		default:
		}
		return nil, fmt.Errorf("%s did not answer on its DevTools pipe (%v; process: %s):\n%s", b.path, err, status, st.String())
	}
	b.inst = in
	return in, nil
}

// watch kills the instance as soon as its process exits or its pipe closes.
func (in *instance) watch() {
	select {
	case <-in.exited:
	case <-in.conn.readDone:
	case <-in.dead:
	}
	in.kill()
}

// kill ends the browser's whole process tree and removes its profile; it is idempotent.
func (in *instance) kill() {
	in.once.Do(func() {
		close(in.dead)
		killTree(in.pid, in.profile)
		in.conn.w.Close()
		select {
		case <-in.exited:
		case <-time.After(grace):
		}
		in.conn.r.Close()
		killTree(in.pid, in.profile) // what the first pass raced with
		os.RemoveAll(in.profile)
	})
}

// alive reports whether the instance answers a browser-level command within grace.
func (in *instance) alive(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, grace)
	defer cancel()
	return in.conn.call(ctx, "", "Browser.getVersion", nil, nil) == nil
}

// current returns the running browser, starting one if there is none or it died.
func (b *Browser) current(ctx context.Context) (*instance, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, ErrClosed
	}
	if in := b.inst; in != nil {
		select {
		case <-in.dead:
		default:
			return in, nil
		}
	}
	b.inst = nil
	return b.startLocked(ctx)
}

// restart kills in and, if it is still the current browser, starts another.
func (b *Browser) restart(ctx context.Context, in *instance) error {
	in.kill()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || b.inst != in {
		return nil
	}
	b.inst = nil
	_, err := b.startLocked(context.WithoutCancel(ctx))
	return err
}

// Close kills the browser's whole process tree and removes its profile. Renders in progress
// return ErrCrash or ErrClosed.
func (b *Browser) Close() error {
	b.mu.Lock()
	b.closed = true
	in := b.inst
	b.inst = nil
	b.mu.Unlock()
	if in != nil {
		in.kill()
	}
	b.resets.Wait() // their browser is gone: they end at once
	b.trap.Close()
	return os.RemoveAll(b.root)
}

// Render renders pageURL with doc as its document and a answering every other request the
// page makes. It waits for a free tab first. It returns once the page is read; its tab is
// readied for the next page after that (page.reset), and counts against Options.Tabs until
// it is.
func (b *Browser) Render(ctx context.Context, pageURL string, doc *Response, a Answerer) (*Result, error) {
	select {
	case b.tabs <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	held := false // the tab's place in b.tabs is released by the page's close
	defer func() {
		if !held {
			<-b.tabs
		}
	}()
	in, err := b.current(ctx)
	if err != nil {
		return nil, err
	}
	t := b.takeTab(in)
	if t == nil {
		if t, err = b.awaitSpare(ctx, in); err != nil {
			return nil, err
		}
	}
	b.spare(in)
	if t != nil && t.prelude != b.prelude { // opened before a test changed the prelude
		t.dispose(in.conn)
		t = nil
	}
	p := newPage(b.o, in, t, pageURL, doc, a, b.prelude)
	p.opened, p.left = b.opened, b.left
	res, err := p.run(ctx)
	if err == nil && p.settled && b.readyLater() {
		// The result is the caller's now; the tab is readied for the next page meanwhile,
		// holding its place in b.tabs until it is.
		held = true
		go func() {
			defer b.resets.Done()
			defer func() { <-b.tabs }()
			b.closePage(p)
		}()
		return res, nil
	}
	b.closePage(p)
	select {
	case <-in.dead: // crashed or hung: the next render must find a browser running
		if rerr := b.restart(ctx, in); rerr != nil {
			return nil, fmt.Errorf("%w (restarting: %v)", err, rerr)
		}
	default:
	}
	return res, err
}

// readyLater counts one more tab being readied in the background (b.resets), unless b is
// closed.
func (b *Browser) readyLater() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	b.resets.Add(1)
	return true
}

// closePage readies p's tab for the next page, or disposes of it (page.close), and gives a
// tab kept back to b.
func (b *Browser) closePage(p *page) {
	if b.closing != nil {
		b.closing()
	}
	p.close()
	if p.tab != nil {
		b.putTab(p.tab)
	}
}

// spare opens one tab of in in the background when the render that just took its tab left
// none waiting and another render could start (fewer than Options.Tabs hold a place), so that
// the next page finds a tab open, as the first finds Start's (warm). One spare is opened at a
// time, and a render that finds no tab waiting waits for it (awaitSpare) rather than open its
// own: a tab is opened only when no tab waits or is being opened, for a render that holds a
// place or could, so no more tabs are open at once than Options.Tabs.
func (b *Browser) spare(in *instance) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || b.inst != in || b.warming != nil || len(b.free) > 0 || len(b.tabs) >= cap(b.tabs) {
		return
	}
	w := make(chan struct{})
	b.warming = w
	b.resets.Add(1) // Close waits for it
	go func() {
		defer b.resets.Done()
		b.warm(context.Background(), in)
		b.mu.Lock()
		b.warming = nil
		b.mu.Unlock()
		close(w)
	}()
}

// awaitSpare waits for the spare tab being opened, if one is, and takes a tab of in waiting
// then; nil when none is (the render opens its own), or ctx's error.
func (b *Browser) awaitSpare(ctx context.Context, in *instance) (*tab, error) {
	b.mu.Lock()
	w := b.warming
	b.mu.Unlock()
	if w == nil {
		return nil, nil
	}
	select {
	case <-w:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return b.takeTab(in), nil
}

// takeTab returns a tab of in waiting for a page, or nil. Tabs of an earlier browser are
// dropped: they died with it.
func (b *Browser) takeTab(in *instance) *tab {
	b.mu.Lock()
	defer b.mu.Unlock()
	for len(b.free) > 0 {
		t := b.free[len(b.free)-1]
		b.free = b.free[:len(b.free)-1]
		if t.in == in {
			return t
		}
	}
	return nil
}

// putTab gives a tab back for the next page.
func (b *Browser) putTab(t *tab) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.closed && t.in == b.inst {
		b.free = append(b.free, t)
	}
}

// tail keeps the last 8 KiB written to it: the browser's output, for error messages.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 8<<10 {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-8<<10:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
