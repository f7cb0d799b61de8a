package aimd

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDocPartsNameExistingIdentifiers checks that every backquoted name in "The parts" of
// docs/aimd.md exists in this package's source: a file (`failure.go`), an identifier it
// declares at top level (a type, function, constant or variable), or `T.m`, a field or method
// m of type T. The map of the controller then cannot drift from the code.
func TestDocPartsNameExistingIdentifiers(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/aimd.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n### The parts\n")
	if !ok {
		t.Fatal(`docs/aimd.md has no "### The parts" section`)
	}
	if i := strings.Index(section, "\n#"); i >= 0 {
		section = section[:i]
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	top := map[string]bool{}                // files and top-level names
	members := map[string]map[string]bool{} // type -> its fields and methods
	member := func(typ, name string) {
		if members[typ] == nil {
			members[typ] = map[string]bool{}
		}
		members[typ][name] = true
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		top[name] = true
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					top[d.Name.Name] = true
					continue
				}
				typ := d.Recv.List[0].Type
				if s, ok := typ.(*ast.StarExpr); ok {
					typ = s.X
				}
				if g, ok := typ.(*ast.IndexExpr); ok { // a generic receiver
					typ = g.X
				}
				if id, ok := typ.(*ast.Ident); ok {
					member(id.Name, d.Name.Name)
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						top[s.Name.Name] = true
						if st, ok := s.Type.(*ast.StructType); ok {
							for _, fl := range st.Fields.List {
								for _, id := range fl.Names {
									member(s.Name.Name, id.Name)
								}
							}
						}
					case *ast.ValueSpec:
						for _, id := range s.Names {
							top[id.Name] = true
						}
					}
				}
			}
		}
	}
	names := regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(section, -1)
	if len(names) < 20 {
		t.Fatalf(`"The parts" names %d identifiers; the test reads the wrong section`, len(names))
	}
	for _, m := range names {
		typ, name, qualified := strings.Cut(m[1], ".")
		switch {
		case qualified && strings.HasSuffix(m[1], ".go"):
			if !top[m[1]] {
				t.Errorf("docs/aimd.md, The parts: `%s` is not a file of package aimd", m[1])
			}
		case qualified:
			if !members[typ][name] {
				t.Errorf("docs/aimd.md, The parts: `%s`: type %s has no field or method %s", m[1], typ, name)
			}
		case !top[m[1]]:
			t.Errorf("docs/aimd.md, The parts: `%s` is declared nowhere in package aimd (at top level)", m[1])
		}
	}
}

// TestDocTunablesMatchConfig checks that the tables of "### Tunables" in docs/aimd.md name
// exactly the constants of config.go's two blocks (the tunables and their arithmetic), with
// the values config.go gives them: the list a reader sees cannot drift from the code.
func TestDocTunablesMatchConfig(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/aimd.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n### Tunables\n")
	if !ok {
		t.Fatal(`docs/aimd.md has no "### Tunables" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	inDoc := map[string]string{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(\\w+)` \\| ([^|]+) \\|").FindAllStringSubmatch(section, -1) {
		inDoc[m[1]] = strings.TrimSpace(m[2])
	}
	src, err := os.ReadFile("config.go")
	if err != nil {
		t.Fatal(err)
	}
	blocks := strings.Split(string(src), "const (")
	if len(blocks) != 4 {
		t.Fatalf("config.go has %d const blocks; want 3 (defaults, tunables, their arithmetic)", len(blocks)-1)
	}
	unit := strings.NewReplacer(" * time.", " ", "time.Hour", "1 h", "Millisecond", "ms", "Second", "s", "*", "×")
	inCode := map[string]string{}
	for _, b := range blocks[2:] {
		b, _, _ = strings.Cut(b, "\n)\n")
		for _, m := range regexp.MustCompile(`(?m)^\t(\w+)\s+= (.+?)\s*//`).FindAllStringSubmatch(b, -1) {
			inCode[m[1]] = unit.Replace(m[2])
		}
	}
	if len(inCode) < 20 {
		t.Fatalf("read %d constants from config.go; the test reads the wrong blocks", len(inCode))
	}
	for name, v := range inCode {
		if d, ok := inDoc[name]; !ok {
			t.Errorf("docs/aimd.md, Tunables: %s (config.go) is not listed", name)
		} else if d != v {
			t.Errorf("docs/aimd.md, Tunables: %s is %q, config.go says %q", name, d, v)
		}
	}
	for name := range inDoc {
		if _, ok := inCode[name]; !ok {
			t.Errorf("docs/aimd.md, Tunables: %s is listed but not in config.go", name)
		}
	}
}
