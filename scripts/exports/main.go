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
	"os"
	"path"
	"path/filepath"
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
	exported := map[string]map[string]bool{} // import path -> names
	used := map[string]map[string]bool{}
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
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil && d.Name.IsExported() {
					exported[ip][d.Name.Name] = true
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							exported[ip][s.Name.Name] = true
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								exported[ip][n.Name] = true
							}
						}
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
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
		ast.Inspect(fl.f, func(n ast.Node) bool {
			if s, ok := n.(*ast.SelectorExpr); ok {
				if x, ok := s.X.(*ast.Ident); ok {
					if ip, ok := names[x.Name]; ok {
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
	var pkgs []string
	for ip := range exported {
		pkgs = append(pkgs, ip)
	}
	sort.Strings(pkgs)
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
