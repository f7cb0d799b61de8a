package simweb

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The host names of an App web, served with Options.VirtualHosts.
const (
	AppSite = "www.app.test" // the application shells
	AppAPI  = "api.app.test" // content and links, as JSON
	AppCDN  = "cdn.app.test" // script, stylesheet, images
)

// AppOptions shape an App web.
type AppOptions struct {
	Pages int // shell pages, "/app/0" (the seed) … "/app/<Pages-1>"; at least 1
	// Sites spreads the pages over this many site hosts (AppSiteOf): page i is on site
	// i mod Sites, so that the workers of a shared crawl each own some; 0 or 1: AppSite alone.
	Sites    int
	APILimit float64    // the API host's token bucket, req/s (burst 1); 0: unlimited
	APIReply ReplyStyle // how the API refuses a request over its limit
	// APIHeaders makes the API state its limit on every answer (per second), as many do.
	APIHeaders HeaderStyle
	CDNLimit   float64 // the CDN host's token bucket, req/s (burst 1); 0: unlimited
	// Prerendered serves the same site rendered on the server: each page's HTML holds its
	// title, text and links (what the script would write), and the same script, stylesheet
	// and image; the script then finds its content there and calls nothing. A crawl that does
	// not render reads it whole: the unrendered twin of the App web, for comparisons.
	Prerendered bool
	// Outside, if set, is a URL every page's script also fetches (an address a crawl must
	// never reach, e.g. one outside its network scope); it is written into the script as is.
	Outside string
	// Post makes the script ask for its content with a JSON POST to AppAPI's "/search"
	// ({"page": i}, cross-origin, so the browser sends a CORS preflight OPTIONS first), and
	// POST its "/private/track" call; "/content/<i>" is then not called.
	Post bool
	// ReflectOrigin makes the API answer as many configured CORS servers do: its
	// Access-Control-Allow-Origin names the request's Origin (and is absent without one), with
	// Vary: Origin. A page then reads the API only if its Origin reached the API, and an
	// answer given to one site's origin is of no use to another's.
	ReflectOrigin bool
}

// App is a web whose pages are built in the browser: each page of AppSite is an application
// shell ("Loading…" and a script from AppCDN) whose script fetches the page's title, text
// and links from AppAPI ("/content/<i>", JSON), also calls "/private/track" on AppAPI, which
// its robots.txt disallows, and Outside; its stylesheet and image come from AppCDN, and the
// stylesheet loads a background image. Page i links to pages 4i+1 … 4i+4, so all are reachable
// from page 0, but only once rendered: the shells' HTML holds no link. Serve Specs with
// Options.VirtualHosts; names resolve to the one listener.
type App struct {
	Specs []HostSpec

	mu     sync.Mutex
	cdn    map[string]int // CDN path -> answers served (admitted by the CDN's bucket)
	search map[string]int // method -> requests to "/search" answered (Post)
}

// NewApp builds an App web. It panics if o.Pages < 1.
func NewApp(o AppOptions) *App {
	if o.Pages < 1 {
		panic(fmt.Sprintf("simweb.NewApp: want at least one page, not %d", o.Pages))
	}
	a := &App{cdn: map[string]int{}, search: map[string]int{}}
	sites := max(o.Sites, 1)
	site := make([]map[string]http.Handler, sites)
	for s := range site {
		site[s] = map[string]http.Handler{}
	}
	api := map[string]http.Handler{
		"/private/track": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			allowOrigin(w, r, o.ReflectOrigin)
			w.WriteHeader(http.StatusNoContent)
		}),
	}
	api["/search"] = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.search[r.Method]++
		a.mu.Unlock()
		allowOrigin(w, r, o.ReflectOrigin)
		switch r.Method {
		case http.MethodOptions:
			w.Header().Set("Access-Control-Allow-Methods", "POST")
			w.Header().Set("Access-Control-Allow-Headers", "content-type")
			w.WriteHeader(http.StatusNoContent)
		case http.MethodPost:
			var q struct{ Page *int }
			if err := json.NewDecoder(io.LimitReader(r.Body, 1<<10)).Decode(&q); err != nil || q.Page == nil || *q.Page < 0 || *q.Page >= o.Pages {
				http.Error(w, "bad query", http.StatusBadRequest)
				return
			}
			a.content(w, r, *q.Page, o.Pages, sites, o.ReflectOrigin)
		default:
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
		}
	})
	for i := range o.Pages {
		site[i%sites][AppPagePath(i)] = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			writeBody(w, "text/html; charset=utf-8", []byte(shellPage(i, o.Pages, sites, o.Prerendered, portOf(r))))
		})
		api["/content/"+strconv.Itoa(i)] = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			a.content(w, r, i, o.Pages, sites, o.ReflectOrigin)
		})
	}
	cdn := map[string]http.Handler{}
	for path, file := range map[string]struct{ ctype, body string }{
		"/app.js":    {"text/javascript; charset=utf-8", appScript(o.Outside, o.Post)},
		"/style.css": {"text/css; charset=utf-8", "body{font-family:sans-serif}\n#app{background:url(bg.png)}\n"},
		"/logo.png":  {"image/png", tinyPNG},
		"/bg.png":    {"image/png", tinyPNG},
	} {
		cdn[path] = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			a.mu.Lock()
			a.cdn[path]++
			a.mu.Unlock()
			w.Header().Set("Cache-Control", "no-store") // the browser's own cache saves nothing
			writeBody(w, file.ctype, []byte(file.body))
		})
	}
	for s := range site {
		a.Specs = append(a.Specs, HostSpec{Name: AppSiteOf(s, sites), Pages: 1, Extra: site[s]})
	}
	a.Specs = append(a.Specs, []HostSpec{
		{Name: AppAPI, Pages: 1, Limit: o.APILimit, Reply: o.APIReply, Disallow: []string{"/private/"}, Extra: api,
			Headers: o.APIHeaders, PolicyWindow: policyWindow(o.APIHeaders)},
		{Name: AppCDN, Pages: 1, Limit: o.CDNLimit, Reply: Reply429Seconds, Extra: cdn},
	}...)
	return a
}

// policyWindow is the window a stated limit is stated per: a second, when it is stated.
func policyWindow(h HeaderStyle) time.Duration {
	if h == HeadersNone {
		return 0
	}
	return time.Second
}

// AppSiteOf is the host of site s of an App web of sites sites (AppSite for the first):
// "www.app.test", "www1.app.test", …; page i is on site i mod sites.
func AppSiteOf(s, sites int) string {
	if s%max(sites, 1) == 0 {
		return AppSite
	}
	return "www" + strconv.Itoa(s%sites) + ".app.test"
}

// AppPagePath is the path of page i of an App web.
func AppPagePath(i int) string { return "/app/" + strconv.Itoa(i) }

// AppTitle and AppText are what page i of an App web shows once rendered: its title, and the
// text of its element "p.content".
func AppTitle(i int) string { return fmt.Sprintf("Rendered page %d", i) }

// AppText: see AppTitle.
func AppText(i int) string {
	return fmt.Sprintf("This is the content of page %d, written by the script from the API's answer.", i)
}

// CDNFetches returns, per path of the CDN host, how many times it was served.
func (a *App) CDNFetches() map[string]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string]int, len(a.cdn))
	for k, v := range a.cdn {
		out[k] = v
	}
	return out
}

// SearchRequests returns the requests to AppAPI's "/search" answered, by method.
func (a *App) SearchRequests() map[string]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return maps.Clone(a.search)
}

// CDNPaths are the paths of the CDN host's files.
var CDNPaths = []string{"/app.js", "/style.css", "/logo.png", "/bg.png"}

// content answers "/content/<i>": page i's title, text and links, as JSON.
func (a *App) content(w http.ResponseWriter, r *http.Request, i, pages, sites int, reflect bool) {
	links := appLinks(i, pages, sites, portOf(r))
	b, _ := json.Marshal(map[string]any{"title": AppTitle(i), "text": AppText(i), "links": links})
	allowOrigin(w, r, reflect)
	writeBody(w, "application/json", b)
}

// allowOrigin lets any origin read the answer to r: "*", or when reflect the request's own
// Origin (none without one), with Vary: Origin.
func allowOrigin(w http.ResponseWriter, r *http.Request, reflect bool) {
	if !reflect {
		w.Header().Set("Access-Control-Allow-Origin", "*")
		return
	}
	w.Header().Set("Vary", "Origin")
	if o := r.Header.Get("Origin"); o != "" {
		w.Header().Set("Access-Control-Allow-Origin", o)
	}
}

// portOf is the port the request was sent to, from its Host header ("80" if none).
func portOf(r *http.Request) string {
	if _, port, err := net.SplitHostPort(r.Host); err == nil {
		return port
	}
	return "80"
}

func shellPage(i, pages, sites int, prerendered bool, port string) string {
	cdn := "http://" + AppCDN + ":" + port
	app := "Loading…"
	if prerendered {
		var b strings.Builder
		b.WriteString("<h1>" + AppTitle(i) + `</h1><p class="content">` + AppText(i) + "</p>")
		for _, l := range appLinks(i, pages, sites, port) {
			b.WriteString(`<a href="` + l + `">` + l + "</a>")
		}
		app = b.String()
	}
	return `<!doctype html>
<html><head><meta charset="utf-8"><title>App</title>
<link rel="stylesheet" href="` + cdn + `/style.css">
<script src="` + cdn + `/app.js" defer></script>
</head><body data-page="` + strconv.Itoa(i) + `">
<div id="app">` + app + `</div>
<img src="` + cdn + `/logo.png" alt="">
</body></html>
`
}

// appLinks are the links of page i of an App web of pages pages over sites sites, served on
// port.
func appLinks(i, pages, sites int, port string) []string {
	links := []string{}
	for j := 4*i + 1; j <= 4*i+4 && j < pages; j++ {
		links = append(links, "http://"+AppSiteOf(j%sites, sites)+":"+port+AppPagePath(j))
	}
	return links
}

// appScript is the shells' script; outside ("" for none) is fetched as is; post: the content
// comes from a JSON POST to "/search".
func appScript(outside string, post bool) string {
	track, content := `fetch(api + "/private/track?page=" + page)`, `fetch(api + "/content/" + page)`
	if post {
		track = `fetch(api + "/private/track?page=" + page, {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify({page: Number(page)})})`
		content = `fetch(api + "/search", {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify({page: Number(page)})})`
	}
	var b strings.Builder
	b.WriteString(`(async function () {
  const page = document.body.dataset.page;
  if (document.querySelector("p.content")) return; // rendered on the server
  const api = location.protocol + "//` + AppAPI + `:" + location.port;
  ` + track + `.catch(function () {});
`)
	if outside != "" {
		q, _ := json.Marshal(outside)
		b.WriteString("  fetch(" + string(q) + ").catch(function () {});\n") // JSON is a JS string literal
	}
	b.WriteString(`  const r = await ` + content + `;
  const d = await r.json();
  document.title = d.title;
  const app = document.getElementById("app");
  app.textContent = "";
  const h = document.createElement("h1");
  h.textContent = d.title;
  app.appendChild(h);
  const p = document.createElement("p");
  p.className = "content";
  p.textContent = d.text;
  app.appendChild(p);
  for (const l of d.links) {
    const a = document.createElement("a");
    a.href = l;
    a.textContent = l;
    app.appendChild(a);
  }
})();
`)
	return b.String()
}

// tinyPNG is a 1×1 transparent PNG.
const tinyPNG = "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89" +
	"\x00\x00\x00\rIDATx\x9cc\x00\x01\x00\x00\x05\x00\x01\r\n-\xb4\x00\x00\x00\x00IEND\xaeB`\x82"
