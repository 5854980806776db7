package apptest_test

import (
	"os"
	"testing"

	"github.com/groundworkhq/groundwork/internal/testenv/pgtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Stop() // the PostgreSQL server pgtest may have started for this package
	os.Exit(code)
}
