package contract

import (
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strconv"
	"testing"
)

// folded is a string expression of a Go file and its constant value.
type folded struct {
	pos   token.Pos
	value string
}

// foldedStrings returns the string literals of f and its concatenations
// that fold to a constant, each outermost expression once: in
// "--key=" + "topology" + ".hostpath.csi/node" the whole, not its parts.
// Import paths are left out.
func foldedStrings(f *ast.File) []folded {
	consts := fileConsts(f)
	var out []folded
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.ImportSpec:
			return false
		case *ast.BasicLit, *ast.BinaryExpr:
			if s, ok := fold(n.(ast.Expr), consts); ok {
				out = append(out, folded{n.Pos(), s})
				return false
			}
		}
		return true
	})
	return out
}

// fileConsts: the string constants f declares from literals and each
// other, by name. Names are not scoped: a local constant that shadows
// another of the file could be misread, which at worst reports a copy
// that is not one.
func fileConsts(f *ast.File) map[string]string {
	consts := map[string]string{}
	for changed := true; changed; {
		changed = false
		ast.Inspect(f, func(n ast.Node) bool {
			d, ok := n.(*ast.GenDecl)
			if !ok || d.Tok != token.CONST {
				return true
			}
			for _, spec := range d.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if i >= len(vs.Values) {
						break
					}
					if _, done := consts[name.Name]; done {
						continue
					}
					if s, ok := fold(vs.Values[i], consts); ok {
						consts[name.Name] = s
						changed = true
					}
				}
			}
			return true
		})
	}
	return consts
}

// fold evaluates e when it is a string literal, a constant of consts, or
// a parenthesised or + concatenation of those.
func fold(e ast.Expr, consts map[string]string) (string, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(e.Value)
		return s, err == nil
	case *ast.Ident:
		s, ok := consts[e.Name]
		return s, ok
	case *ast.ParenExpr:
		return fold(e.X, consts)
	case *ast.BinaryExpr:
		if e.Op != token.ADD {
			return "", false
		}
		x, ok := fold(e.X, consts)
		if !ok {
			return "", false
		}
		y, ok := fold(e.Y, consts)
		return x + y, ok
	}
	return "", false
}

func TestFold(t *testing.T) {
	src := `package p
const prefix = "topology." + "hostpath.csi/"
var a = "--key=" + prefix + ("no" + "de")
var b = "x" + y + "z"
`
	f, err := parser.ParseFile(token.NewFileSet(), "p.go", src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range foldedStrings(f) {
		got = append(got, s.value)
	}
	want := []string{"topology.hostpath.csi/", "--key=topology.hostpath.csi/node", "x", "z"}
	if !slices.Equal(got, want) {
		t.Errorf("folded %q, want %q", got, want)
	}
}
