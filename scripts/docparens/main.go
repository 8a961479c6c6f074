// Command docparens measures how the doc comments of exported declarations
// read, per package under a directory: words, opening parentheses per 100
// words, and the share of comments whose first sentence is over 40 words (a
// comment should open with one sentence saying what the thing does). It is
// issue 39's measure of "docs a newcomer reads" (net/http: about 0.9
// parentheses per 100 words). Test files, testdata and package main are left out.
//
//	go run ./scripts/docparens [-worst N] DIR
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

type doc struct {
	where string
	words int
	paren int
	first int // words in the first sentence
}

func main() {
	worst := flag.Int("worst", 0, "list the N comments with the most parentheses per word (at least 30 words)")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: docparens [-worst N] DIR")
		os.Exit(2)
	}
	root := flag.Arg(0)
	byPkg, err := measure(root)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	pkgs := slices.Sorted(maps.Keys(byPkg))
	var all []doc
	tw, tp, tl, tn := 0, 0, 0, 0
	for _, p := range pkgs {
		w, pa, long := 0, 0, 0
		for _, d := range byPkg[p] {
			w += d.words
			pa += d.paren
			if d.first > 40 {
				long++
			}
		}
		all = append(all, byPkg[p]...)
		tw, tp, tl, tn = tw+w, tp+pa, tl+long, tn+len(byPkg[p])
		fmt.Printf("%-24s %4d comments %6d words %4.1f parens/100 words %3d%% first sentence > 40 words\n",
			p, len(byPkg[p]), w, 100*float64(pa)/float64(max(w, 1)), 100*long/max(len(byPkg[p]), 1))
	}
	fmt.Printf("%-24s %4d comments %6d words %4.1f parens/100 words %3d%% first sentence > 40 words\n",
		"total", tn, tw, 100*float64(tp)/float64(max(tw, 1)), 100*tl/max(tn, 1))
	if *worst > 0 {
		sort.Slice(all, func(i, j int) bool {
			ri := float64(all[i].paren) / float64(max(all[i].words, 1))
			rj := float64(all[j].paren) / float64(max(all[j].words, 1))
			if all[i].words < 30 {
				ri = 0
			}
			if all[j].words < 30 {
				rj = 0
			}
			return ri > rj
		})
		for _, d := range all[:min(*worst, len(all))] {
			fmt.Printf("%5.1f %4d words  %s\n", 100*float64(d.paren)/float64(max(d.words, 1)), d.words, d.where)
		}
	}
}

// measure returns the doc comments of the exported declarations of the Go files under root, by
// package directory.
func measure(root string) (byPkg map[string][]doc, err error) {
	fset := token.NewFileSet()
	byPkg = map[string][]doc{}
	err = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		if f.Name.Name == "main" {
			return nil
		}
		rel, _ := filepath.Rel(root, filepath.Dir(p))
		add := func(name string, g *ast.CommentGroup) {
			if g == nil || !ast.IsExported(name) {
				return
			}
			t := g.Text()
			ws := strings.Fields(t)
			first := len(ws)
			for i, w := range ws {
				if strings.HasSuffix(w, ".") || strings.HasSuffix(w, ":") {
					first = i + 1
					break
				}
			}
			pos := fset.Position(g.Pos())
			byPkg[filepath.ToSlash(rel)] = append(byPkg[filepath.ToSlash(rel)], doc{
				where: fmt.Sprintf("%s:%d %s", filepath.ToSlash(pos.Filename), pos.Line, name),
				words: len(ws), paren: strings.Count(t, "("), first: first})
		}
		docsOf(f, add)
		return nil
	})
	return byPkg, err
}

// docsOf calls add with the name and doc comment of each exported declaration of f: functions,
// methods of exported types (under the type's name), types, variables and constants.
func docsOf(f *ast.File, add func(name string, g *ast.CommentGroup)) {
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			name := d.Name.Name
			if d.Recv != nil && len(d.Recv.List) == 1 {
				t := d.Recv.List[0].Type
				if s, ok := t.(*ast.StarExpr); ok {
					t = s.X
				}
				if ix, ok := t.(*ast.IndexExpr); ok {
					t = ix.X
				}
				if id, ok := t.(*ast.Ident); ok {
					if !id.IsExported() {
						continue
					}
					name = id.Name + "." + name
					if !d.Name.IsExported() {
						continue
					}
					add(id.Name, d.Doc) // exported receiver: the method's name is checked above
					continue
				}
			}
			add(name, d.Doc)
		case *ast.GenDecl:
			for _, s := range d.Specs {
				g := d.Doc
				switch s := s.(type) {
				case *ast.TypeSpec:
					if s.Doc != nil {
						g = s.Doc
					}
					add(s.Name.Name, g)
				case *ast.ValueSpec:
					if s.Doc != nil {
						g = s.Doc
					}
					if len(s.Names) > 0 {
						add(s.Names[0].Name, g)
					}
				}
			}
		}
	}
}
