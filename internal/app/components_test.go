package app

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A chart CA file that does not hold a certificate stops the server at start, naming the flag,
// instead of failing the first install that fetches a chart.
func TestBadChartCAFileStopsStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(bad, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Should it start after all, it stops at the deadline and the check below fails.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := Run(ctx, Options{DataDir: dir, Addr: "127.0.0.1:0", Logger: slog.New(slog.DiscardHandler),
		Components: ComponentOptions{ChartCAFile: bad}})
	if err == nil || !strings.Contains(err.Error(), "--chart-ca-file") {
		t.Fatalf("Run with a bad chart CA file = %v, want an error naming --chart-ca-file", err)
	}
}
