// Package render renders pages that build themselves with JavaScript in one headless Chromium,
// and answers every request the page makes through the caller: it knows nothing of the crawl.
//
// There are only a few types: Browser (one browser process, restarted when it dies or hangs,
// rendering up to Options.Tabs pages at once), Answerer (the caller's answer to each request
// the page makes), Request and Response, and Result (the serialised DOM and which cap, if any,
// cut the render).
//
// Render serves the page's document from the body the caller passes (it is never fetched) and
// pauses every other request in the browser (the DevTools Fetch domain, every URL, request
// stage, in the page and in each frame and worker attached under it) until the Answerer
// answers it; the browser sees exactly that answer, a redirect included (it follows it, and
// the next hop is paused too). Render itself refuses WebSockets, EventSource, beacons and
// pings, prefetches and prerenders, service and shared workers, the tab's icon, downloads,
// and the page navigating itself away (aborted: the page stays as it is). What interception
// cannot see is sent to a proxy of render's own that closes every connection (loopback
// included), and no host name resolves, so nothing the page does reaches the network except
// through the Answerer. Dialogs (alert, confirm) are dismissed.
//
// Each tab is a browser context of its own holding one target, kept for up to
// Options.TabPages pages: a page is a navigation of the tab, after which render ends the page
// (about:blank) and clears its cookies, storage and the tab's sessionStorage and window.name;
// the renderer's memory cache is off, so every page's requests reach the Answerer. A tab is
// closed after a page that did not settle, or when its script heap grows past a bound, so
// memory stays bounded by Options.Tabs. A render ends when the page has
// fired its load event and no request has been in flight for Options.Quiet, or at the first
// cap: Options.Timeout, MaxRequests, MaxBytes; the page is then kept as rendered, with
// Result.Cut naming the cap. The DOM (its doctype, then document.documentElement.outerHTML)
// is cut at Options.MaxDOM (CutDOM). A browser that dies or stops answering is killed and
// restarted, and the render returns ErrCrash (so does a crash of the page's renderer alone);
// a page that cannot produce a DOM in time returns ErrTimeout.
//
// The browser runs in its own process group with a parent-death signal (Linux), so it dies
// with the crawl even when the crawl is killed with SIGKILL; its children (zygote, renderers)
// end when their pipes to it close, and Close kills whatever is left.
//
// The design and its reasons are in docs/render.md.
//
// The driver is a DevTools client of render's own over --remote-debugging-pipe, rather than
// chromedp or go-rod. Render uses about fifteen commands of the protocol's stable core
// (Target, Fetch, Page, Runtime), each in a few lines; owning the client gives full control
// over the interception (every request paused in the reader's own goroutine, bounded queues,
// no hidden handlers continuing requests) and over the process (its flags, process group and
// death signal, no debugging port open to other local processes). chromedp and go-rod each
// bring a generated binding of the whole protocol that changes with every Chromium release,
// and start the browser their own way; their interception helpers (go-rod's hijack router,
// chromedp's ListenTarget callbacks) are thin layers over the same Fetch commands.
package render
