// Command funclen lists the functions (and function literals) of the Go
// files under a directory whose bodies exceed a number of lines, longest
// first, with their file and line: the measure of issue 32's "short
// functions". Test files and testdata are left out.
//
//	go run ./scripts/funclen [-min 80] DIR
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	minLines := flag.Int("min", 80, "list the bodies longer than this many lines")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: funclen [-min N] DIR")
		os.Exit(2)
	}
	root := flag.Arg(0)
	type fn struct {
		name string
		n    int
	}
	var fns []fn
	fset := token.NewFileSet()
	err := filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if info.IsDir() && (info.Name() == ".git" || info.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			return nil
		}
		ast.Inspect(f, func(n ast.Node) bool {
			var body *ast.BlockStmt
			var name string
			switch d := n.(type) {
			case *ast.FuncDecl:
				body, name = d.Body, d.Name.Name
				if d.Recv != nil && len(d.Recv.List) > 0 {
					t := d.Recv.List[0].Type
					if s, ok := t.(*ast.StarExpr); ok {
						t = s.X
					}
					if id, ok := t.(*ast.Ident); ok {
						name = id.Name + "." + name
					}
				}
			case *ast.FuncLit:
				body, name = d.Body, "func literal"
			}
			if body == nil {
				return true
			}
			l := fset.Position(body.Rbrace).Line - fset.Position(body.Lbrace).Line + 1
			if l > *minLines {
				rel, _ := filepath.Rel(root, fset.Position(body.Lbrace).Filename)
				fns = append(fns, fn{fmt.Sprintf("%s:%d %s", rel, fset.Position(body.Lbrace).Line, name), l})
			}
			return true
		})
		return nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "funclen:", err)
		os.Exit(1)
	}
	sort.Slice(fns, func(i, j int) bool { return fns[i].n > fns[j].n })
	for _, f := range fns {
		fmt.Println(f.n, f.name)
	}
	fmt.Println("count", len(fns))
}
