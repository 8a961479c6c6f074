// Command exports counts, per package under a module directory, the exported
// top-level names (functions, types, variables, constants) that no file of
// another package uses: the measure of issue 39's "unused exports". A use is a
// selector pkg.Name in any Go file of another directory, tests included, with
// pkg resolved through that file's imports; methods and fields are not counted.
// Exports of package main and of testdata are left out.
//
//	go run ./scripts/exports [-list] DIR
package main

import (
	"bufio"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
)

func main() {
	list := flag.Bool("list", false, "list the unused names")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: exports [-list] DIR")
		os.Exit(2)
	}
	root := flag.Arg(0)
	module, err := modulePath(filepath.Join(root, "go.mod"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	exported, used, err := scan(root, module)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	pkgs := slices.Sorted(maps.Keys(exported))
	total, unused := 0, 0
	for _, ip := range pkgs {
		var un []string
		for n := range exported[ip] {
			if !used[ip][n] {
				un = append(un, n)
			}
		}
		if len(exported[ip]) == 0 {
			continue
		}
		sort.Strings(un)
		total += len(exported[ip])
		unused += len(un)
		fmt.Printf("%-28s %3d of %3d unused\n", strings.TrimPrefix(ip, module+"/"), len(un), len(exported[ip]))
		if *list && len(un) > 0 {
			fmt.Printf("    %s\n", strings.Join(un, " "))
		}
	}
	fmt.Printf("total %d of %d unused\n", unused, total)
}

// scan parses the Go files under root and returns, per import path of module, its exported
// top-level names and the names other packages use.
func scan(root, module string) (exported, used map[string]map[string]bool, err error) {
	exported = map[string]map[string]bool{} // import path -> names
	used = map[string]map[string]bool{}
	fset := token.NewFileSet()
	type file struct {
		dir string
		f   *ast.File
	}
	var files []file
	err = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && p != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(p))
		files = append(files, file{filepath.ToSlash(rel), f})
		if f.Name.Name == "main" || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		ip := path.Join(module, filepath.ToSlash(rel))
		if exported[ip] == nil {
			exported[ip] = map[string]bool{}
		}
		addExports(exported[ip], f)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	for _, fl := range files {
		own := path.Join(module, fl.dir)
		names := map[string]string{}
		for _, im := range fl.f.Imports {
			ip, _ := strconv.Unquote(im.Path.Value)
			if ip == own || !strings.HasPrefix(ip, module) {
				continue
			}
			n := path.Base(ip)
			if im.Name != nil {
				n = im.Name.Name
			}
			names[n] = ip
		}
		addUses(used, fl.f, names)
	}
	return exported, used, nil
}

// addExports adds the exported top-level names of f to names.
func addExports(names map[string]bool, f *ast.File) {
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil && d.Name.IsExported() {
				names[d.Name.Name] = true
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					if s.Name.IsExported() {
						names[s.Name.Name] = true
					}
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if n.IsExported() {
							names[n.Name] = true
						}
					}
				}
			}
		}
	}
}

// addUses adds to used every selector pkg.Name of f whose pkg is an import of the module (imports:
// the file's names of them).
func addUses(used map[string]map[string]bool, f *ast.File, imports map[string]string) {
	ast.Inspect(f, func(n ast.Node) bool {
		if s, ok := n.(*ast.SelectorExpr); ok {
			if x, ok := s.X.(*ast.Ident); ok {
				if ip, ok := imports[x.Name]; ok {
					if used[ip] == nil {
						used[ip] = map[string]bool{}
					}
					used[ip][s.Sel.Name] = true
				}
			}
		}
		return true
	})
}

func modulePath(gomod string) (string, error) {
	f, err := os.Open(gomod)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m, ok := strings.CutPrefix(sc.Text(), "module "); ok {
			return strings.TrimSpace(m), nil
		}
	}
	return "", fmt.Errorf("%s: no module line", gomod)
}
