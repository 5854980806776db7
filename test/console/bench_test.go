package console

import (
	"bytes"
	"compress/gzip"
	"context"
	"io/fs"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/groundworkhq/groundwork/internal/app"
	"github.com/groundworkhq/groundwork/internal/app/apptest"
	"github.com/groundworkhq/groundwork/internal/console"
)

// BenchmarkConsoleFirstLoad prints the built console's size, raw and gzipped, and how long a
// browser with an empty cache takes from navigation to the sign-in form against a local
// server. It measures; it asserts nothing about speed.
//
//	go test ./test/console -run '^$' -bench ConsoleFirstLoad -benchtime 5x
func BenchmarkConsoleFirstLoad(b *testing.B) {
	requireBuiltConsole(b)
	var raw, zipped int
	err := fs.WalkDir(console.Embedded(), ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(console.Embedded(), path)
		if err != nil {
			return err
		}
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		_, _ = zw.Write(data)
		_ = zw.Close()
		raw += len(data)
		zipped += buf.Len()
		b.Logf("%-40s %7d bytes, %6d gzipped", path, len(data), buf.Len())
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("console total: %d bytes, %d gzipped", raw, zipped)

	s := apptest.Start(b, app.Options{})
	_, first := browser(b, 1280, 800)
	var total time.Duration
	b.ResetTimer()
	for range b.N {
		// A new browser context per load: an empty cache, as on a first visit.
		tab, cancel := chromedp.NewContext(first, chromedp.WithNewBrowserContext())
		if err := chromedp.Do(tab); err != nil {
			b.Fatal(err)
		}
		ctx, stop := context.WithTimeout(tab, 30*time.Second)
		start := time.Now()
		err := chromedp.Do(ctx, chromedp.Navigate(s.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#token")))
		total += time.Since(start)
		stop()
		cancel()
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(zipped), "gzip-bytes")
	b.ReportMetric(float64(raw), "raw-bytes")
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/first-load")
}
