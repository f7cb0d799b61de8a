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
// docs/aimd.md exists in this package's source: a file (`bucketfit.go`), an identifier it
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
