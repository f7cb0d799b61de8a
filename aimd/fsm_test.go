package aimd

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestOnlyTransitionsWriteRateWindowPhase: outside fsm.go no code of the package assigns the
// controller's rate (c.rate), window (c.win.size, or w.size on a windowState) or phase
// (c.phase), nor takes their address: the transitions are the state machine's only writers.
func TestOnlyTransitionsWriteRateWindowPhase(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	// guarded reports whether e is one of the written fields: X.rate or X.phase with X a
	// Controller (named c), or X.size with X the window (c.win, or w in a windowState method).
	guarded := func(e ast.Expr) (string, bool) {
		sel, ok := e.(*ast.SelectorExpr)
		if !ok {
			return "", false
		}
		switch x := sel.X.(type) {
		case *ast.Ident:
			if x.Name == "c" && (sel.Sel.Name == "rate" || sel.Sel.Name == "phase") {
				return "c." + sel.Sel.Name, true
			}
			if x.Name == "w" && sel.Sel.Name == "size" {
				return "w.size", true
			}
		case *ast.SelectorExpr:
			if id, ok := x.X.(*ast.Ident); ok && id.Name == "c" && x.Sel.Name == "win" && sel.Sel.Name == "size" {
				return "c.win.size", true
			}
		}
		return "", false
	}
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		ast.Inspect(f, func(n ast.Node) bool {
			var targets []ast.Expr
			switch n := n.(type) {
			case *ast.AssignStmt:
				targets = n.Lhs
			case *ast.IncDecStmt:
				targets = []ast.Expr{n.X}
			case *ast.UnaryExpr:
				if n.Op == token.AND {
					targets = []ast.Expr{n.X}
				}
			}
			for _, e := range targets {
				if what, ok := guarded(e); ok && name != "fsm.go" {
					t.Errorf("%s: %s is written outside fsm.go", fset.Position(e.Pos()), what)
				}
			}
			return true
		})
	}
	if checked < 10 {
		t.Fatalf("checked %d files; want the package's", checked)
	}
}
