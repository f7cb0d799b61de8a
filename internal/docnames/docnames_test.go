package docnames

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// root is the module's root, relative to this package's directory.
const root = "../.."

// external are the packages outside this module whose names the references write as
// `pkg.Name`; such a name is not checked (the package's own documentation is its reference).
var external = map[string]bool{
	"bbolt": true, "rate": true, "http": true, "url": true, "time": true, "context": true,
	"goquery": true, "robotstxt": true, "html": true, "redis": true, "chromedp": true,
	"cdproto": true, "os": true, "io": true, "net": true, "errors": true, "sync": true,
	"atomic": true, "httptest": true, "testing": true, "tls": true, "slog": true, "log": true,
	"fmt": true, "runtime": true, "debug": true, "colly": true, "json": true, "bytes": true,
	"strings": true, "zstd": true, "x509": true, "signal": true, "syscall": true, "exec": true,
	"filepath": true, "sort": true, "math": true, "rand": true, "csv": true, "gzip": true,
	"expvar": true, "pprof": true, "netip": true, "bufio": true, "utf8": true, "strconv": true,
}

// allowed are bare names the references write as code that are not Go names of this module,
// each with the reason it may stay.
var allowed = map[string]string{
	// HTTP header and field names written as code.
	"Authorization": "HTTP header", "Cookie": "HTTP header", "Date": "HTTP header",
	"Location": "HTTP header", "Mozilla": "User-Agent product token", "MyBot": "example user-agent token",
	"ETag": "HTTP header", "Expires": "HTTP header", "Host": "HTTP header",
	"Server": "HTTP header", "Vary": "HTTP header", "Referer": "HTTP header",
	"RateLimit": "HTTP header (IETF httpapi-ratelimit-headers)", "Allow": "robots.txt rule",
	"Disallow": "robots.txt rule", "Sitemap": "robots.txt rule",
	// Names of other projects' APIs, written bare in comparisons.
	"FillPercent": "bbolt's Bucket.FillPercent", "InitialMmapSize": "bbolt's Options.InitialMmapSize",
	"SetLimit": "rate.Limiter.SetLimit", "NoSync": "bbolt's DB.NoSync",
	"tx.CopyFile": "bbolt's Tx.CopyFile", "ParseURL": "go-redis' redis.ParseURL",
	"u.Host": "a url.URL's field, in an example",
	// The browser's names in the rendering references: Chrome DevTools Protocol methods,
	// events and parameters, and Web APIs a rendered page's script may call.
	"Fetch.enable": "DevTools Protocol method", "Fetch.fulfillRequest": "DevTools Protocol method",
	"Fetch.failRequest": "DevTools Protocol method", "Target.setAutoAttach": "DevTools Protocol method",
	"Runtime.evaluate": "DevTools Protocol method", "Inspector.targetCrashed": "DevTools Protocol event",
	"frameStoppedLoading":    "DevTools Protocol event (Page domain)",
	"waitForDebuggerOnStart": "parameter of Target.setAutoAttach", "Purpose": "HTTP header",
	"EventSource": "Web API", "RTCPeerConnection": "Web API", "WebSocket": "Web API",
	"navigator.serviceWorker": "Web API", "outerHTML": "DOM property",
	"setTimeout": "Web API", "setInterval": "Web API",
}

// goName matches a code span that reads as a Go name: `Name`, `pkg.Name`, `Type.Field`,
// `Type.Method()`, with an upper-case letter showing it is an identifier, not a word.
var goName = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)(\.[A-Za-z_][A-Za-z0-9_]*)*(\(\))?$`)

func looksLikeGoName(s string) bool {
	if !goName.MatchString(s) {
		return false
	}
	s = strings.TrimSuffix(s, "()")
	if strings.ToUpper(s) == s { // CSV, PATH, CRAWL_AS_MAIN: words and variables, not Go names
		return false
	}
	if strings.Contains(s, ".") {
		last := s[strings.LastIndex(s, ".")+1:]
		if strings.ToLower(last) == last && !strings.ContainsAny(s[:strings.LastIndex(s, ".")], "ABCDEFGHIJKLMNOPQRSTUVWXYZ") {
			return false // crawl.db, main.go, docs/x.md: file names
		}
		return true
	}
	return strings.ContainsAny(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZ")
}

// names is what the module's Go code declares.
type names struct {
	top      map[string]bool            // top-level names, package names and file names
	members  map[string]map[string]bool // type -> its fields and methods
	packages map[string]map[string]bool // package name -> its top-level names
}

func (n *names) member(typ, name string) {
	if n.members[typ] == nil {
		n.members[typ] = map[string]bool{}
	}
	n.members[typ][name] = true
}

func collect(t *testing.T) *names {
	n := &names{top: map[string]bool{}, members: map[string]map[string]bool{}, packages: map[string]map[string]bool{}}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		pkg := f.Name.Name
		n.top[pkg] = true
		n.top[filepath.Base(filepath.Dir(path))] = true
		if n.packages[pkg] == nil {
			n.packages[pkg] = map[string]bool{}
		}
		add := func(name string) {
			n.top[name] = true
			n.packages[pkg][name] = true
		}
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					add(d.Name.Name)
					continue
				}
				if id := recvType(d.Recv.List[0].Type); id != "" {
					n.member(id, d.Name.Name)
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						add(s.Name.Name)
						n.typeMembers(s.Name.Name, s.Type)
					case *ast.ValueSpec:
						for _, id := range s.Names {
							add(id.Name)
						}
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func recvType(e ast.Expr) string {
	if s, ok := e.(*ast.StarExpr); ok {
		e = s.X
	}
	switch g := e.(type) {
	case *ast.IndexExpr:
		e = g.X
	case *ast.IndexListExpr:
		e = g.X
	}
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

func (n *names) typeMembers(typ string, e ast.Expr) {
	var fields *ast.FieldList
	switch s := e.(type) {
	case *ast.StructType:
		fields = s.Fields
	case *ast.InterfaceType:
		fields = s.Methods
	default:
		return
	}
	for _, fl := range fields.List {
		for _, id := range fl.Names {
			n.member(typ, id.Name)
		}
		if len(fl.Names) == 0 { // embedded: its name is a field too
			if id := recvType(fl.Type); id != "" {
				n.member(typ, id)
			} else if sel, ok := fl.Type.(*ast.SelectorExpr); ok {
				n.member(typ, sel.Sel.Name)
			}
		}
	}
}

// exists reports whether the code declares name (as written in a reference, "()" removed).
func (n *names) exists(name string) bool {
	parts := strings.Split(name, ".")
	if len(parts) == 1 {
		return n.top[name] || n.isMember(name)
	}
	if external[parts[0]] {
		return true
	}
	// pkg.Name, pkg.Type.Member, Type.Member
	if p, ok := n.packages[parts[0]]; ok && p[parts[1]] {
		return len(parts) == 2 || n.members[parts[1]][parts[2]]
	}
	if len(parts) == 2 {
		return n.members[parts[0]][parts[1]]
	}
	return false
}

func (n *names) isMember(name string) bool {
	for _, m := range n.members {
		if m[name] {
			return true
		}
	}
	return false
}

// codeSpan matches an inline code span on one line.
var codeSpan = regexp.MustCompile("`([^`\n]+)`")

// TestReferencesNameExistingCode checks every Go name written as inline code in README.md and
// docs/*.md against the module's declarations; a name that is not there fails the test with
// its file and line, unless it is in allowed.
func TestReferencesNameExistingCode(t *testing.T) {
	t.Parallel()
	n := collect(t)
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	docs = append(docs, filepath.Join(root, "README.md"))
	sort.Strings(docs)
	checked := 0
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		inFence := false
		for i, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				inFence = !inFence
				continue
			}
			if inFence {
				continue
			}
			for _, m := range codeSpan.FindAllStringSubmatch(line, -1) {
				name := strings.TrimSuffix(m[1], "()")
				if !looksLikeGoName(m[1]) || allowed[name] != "" {
					continue
				}
				checked++
				if !n.exists(name) {
					rel, _ := filepath.Rel(root, doc)
					t.Errorf("%s:%d: `%s` names nothing in the code (rename it, remove it, or allow it in docnames_test.go with a reason)", rel, i+1, m[1])
				}
			}
		}
	}
	if checked < 100 {
		t.Fatalf("only %d names checked: the references or the matcher changed shape", checked)
	}
}

// TestMatcher pins which code spans count as Go names.
func TestMatcher(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]bool{
		"Options": true, "storage.Page": true, "Frontier.Complete": true, "Burst()": true,
		"searchReached": true, "crawl.db": false, "never": false, "CSV": false,
		"--render": false, "CRAWL_AS_MAIN": false, "docs/cli.md": false, "X-Robots-Tag": false,
	} {
		if got := looksLikeGoName(s); got != want {
			t.Errorf("looksLikeGoName(%q) = %v, want %v", s, got, want)
		}
	}
	n := &names{top: map[string]bool{"Open": true}, members: map[string]map[string]bool{"DB": {"Batch": true}},
		packages: map[string]map[string]bool{"storage": {"DB": true, "Open": true}}}
	for s, want := range map[string]bool{
		"Open": true, "storage.Open": true, "storage.DB.Batch": true, "DB.Batch": true,
		"DB.Gone": false, "storage.Gone": false, "Gone": false, "rate.Limiter": true, "Batch": true,
	} {
		if got := n.exists(s); got != want {
			t.Errorf("exists(%q) = %v, want %v", s, got, want)
		}
	}
}
