package store_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/groundworkhq/groundwork/"

// goFiles parses the non-test Go files of dir (relative to this package).
func goFiles(t *testing.T, dir string, mode parser.Mode) map[string]*ast.File {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	out := map[string]*ast.File{}
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, mode)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = f
	}
	if len(out) == 0 {
		t.Fatalf("no Go files in %s", dir)
	}
	return out
}

// The store and the SQL code under it sit below the domain packages: they declare the records
// they keep, and the domain packages alias them. Were sqlstore to import a domain package
// again, that package could never use the store without a cycle, and the store's shape would
// follow the domain's. Only the ground packages (the job record, cluster records) are allowed.
func TestStoreImportsNoDomainPackage(t *testing.T) {
	t.Parallel()
	allowed := []string{"internal/store", "internal/job", "internal/cluster"}
	for _, dir := range []string{".", "sqlstore", "sqlite", "postgres"} {
		t.Run(dir, func(t *testing.T) {
			t.Parallel()
			for name, f := range goFiles(t, dir, parser.ImportsOnly) {
				for _, imp := range f.Imports {
					path, err := strconv.Unquote(imp.Path.Value)
					if err != nil {
						t.Fatal(err)
					}
					rel, ok := strings.CutPrefix(path, module)
					if !ok {
						continue
					}
					ground := false
					for _, a := range allowed {
						ground = ground || rel == a || strings.HasPrefix(rel, a+"/")
					}
					if !ground {
						t.Errorf("%s imports %s; the store may import only %v", name, path, allowed)
					}
				}
			}
		})
	}
}

// The application and the API are wired with a store.Full, whose abilities the compiler checks.
// A type assertion on the store would move that check back to run time (and to a branch that
// silently turns a feature off), so none may appear. The store is recognised by how both
// packages name it: st, tx, a Store field, or an assertion to one of its abilities.
func TestAppAndAPIAssertNothingOfTheStore(t *testing.T) {
	t.Parallel()
	storeNames := map[string]bool{"st": true, "tx": true, "store": true, "Store": true}
	abilities := map[string]bool{
		"store":          true, // any interface of package store
		"secrets.Ledger": true, "secrets.EndedJobs": true, "protocol.ProvisionerStore": true,
		"remediation.Timeline": true, "datastore.Records": true, "api.RequestKeys": true,
		"RequestKeys": true, "DatastoreRecords": true,
		"oldestDue": true, "clusterSpaceStore": true, "datastoreRecords": true,
	}
	isStore := func(e ast.Expr) bool {
		switch x := e.(type) {
		case *ast.Ident:
			return storeNames[x.Name]
		case *ast.SelectorExpr:
			return storeNames[x.Sel.Name]
		}
		return false
	}
	isAbility := func(e ast.Expr) bool {
		switch x := e.(type) {
		case *ast.Ident:
			return abilities[x.Name]
		case *ast.SelectorExpr:
			pkg, ok := x.X.(*ast.Ident)
			return ok && (abilities[pkg.Name] || abilities[pkg.Name+"."+x.Sel.Name])
		}
		return false
	}
	for _, dir := range []string{"../app", "../api"} {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			t.Parallel()
			for name, f := range goFiles(t, dir, parser.SkipObjectResolution) {
				ast.Inspect(f, func(n ast.Node) bool {
					ta, ok := n.(*ast.TypeAssertExpr)
					if !ok {
						return true
					}
					// ta.Type is nil in a type switch: a switch over the store's dynamic type
					// is as much a run-time question as an assertion.
					if isStore(ta.X) || ta.Type != nil && isAbility(ta.Type) {
						asserted := "type"
						if ta.Type != nil {
							asserted = types.ExprString(ta.Type)
						}
						t.Errorf("%s: type assertion on the store, %s.(%s); take the ability as a typed value",
							name, types.ExprString(ta.X), asserted)
					}
					return true
				})
			}
		})
	}
}
