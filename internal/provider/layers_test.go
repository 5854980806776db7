package provider_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The HTTP layer and the pipelines never import a cloud module: a pipeline declares the
// Driver it needs and the server's wiring hands it one from the registry, so that adding a
// cloud changes neither. (Tests may use a module to drive a pipeline.)
func TestAPIAndPipelinesImportNoProvider(t *testing.T) {
	t.Parallel()
	const provider = "github.com/groundworkhq/groundwork/internal/provider"
	for _, root := range []string{"../api", "../pipeline"} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
			if err != nil {
				return err
			}
			for _, imp := range f.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				if p == provider || strings.HasPrefix(p, provider+"/") {
					t.Errorf("%s imports %s", path, p)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
