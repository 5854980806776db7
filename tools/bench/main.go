// Command bench runs the same no-op workload through Groundwork's engine and through River,
// in one process and one run, against the same database, and prints what each does: jobs and
// steps per second, claim-to-start latency, the ratio between them and the database's raw
// commit rate as the ceiling. It also measures the ledger at scale, 10,000 waiting jobs and
// the API under load. It exits non-zero when a run misses the targets it checks.
//
//	go run ./tools/bench                  # SQLite and a throwaway stock PostgreSQL 15
//	go run ./tools/bench -db postgres -pg-url postgres://...
//	go run ./tools/bench -json
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"

	"github.com/groundworkhq/groundwork/internal/store/postgres"
	"github.com/groundworkhq/groundwork/internal/store/sqlite"
)

type options struct {
	dbs        []string
	pgURL      string
	pgBin      string
	workers    int
	prefetch   int
	jobs       int
	rounds     int
	samples    int
	waiting    int
	waitFor    time.Duration
	ledgerRows []int
	apiRates   []int
	scale      []int
	apiFor     time.Duration
	json       bool
	noCheck    bool
}

func main() {
	var o options
	var dbs, ledger, rates, scale string
	flag.StringVar(&dbs, "db", "sqlite,postgres", "databases to measure, comma-separated: sqlite, postgres")
	flag.StringVar(&o.pgURL, "pg-url", "", "PostgreSQL URL (a database the bench may fill and empty); empty starts a throwaway server")
	flag.StringVar(&o.pgBin, "pg-bin", "/usr/lib/postgresql/15/bin", "PostgreSQL server binaries for the throwaway server")
	flag.IntVar(&o.workers, "workers", 100, "workers for both Groundwork and River")
	flag.IntVar(&o.prefetch, "prefetch", 0, "the engine's prefetch: claimed jobs that may wait for a free worker (0: the engine's default, -1: off)")
	flag.IntVar(&o.jobs, "jobs", 10000, "pre-inserted no-op jobs per throughput run")
	flag.StringVar(&scale, "scale-workers", "1,4,16,64,256", "worker counts for the scaling run, ascending (empty skips)")
	flag.IntVar(&o.rounds, "rounds", 5, "times to repeat the side-by-side throughput comparison")
	flag.IntVar(&o.samples, "samples", 200, "jobs inserted one at a time for claim-to-start latency")
	flag.IntVar(&o.waiting, "waiting", 10000, "jobs waiting on a 10s poll in the waiting case (0 skips)")
	flag.DurationVar(&o.waitFor, "waiting-for", 30*time.Second, "how long the waiting case is measured, after a 10s warm-up")
	flag.StringVar(&ledger, "ledger-rows", "10000,1000000", "finished rows in the ledger for claim and list latency (empty skips)")
	flag.StringVar(&rates, "api-rates", "200,500", "request rates for the API case (empty skips)")
	flag.DurationVar(&o.apiFor, "api-for", 10*time.Second, "how long each API rate is held")
	flag.BoolVar(&o.json, "json", false, "print the results as JSON")
	flag.BoolVar(&o.noCheck, "no-check", false, "exit 0 even when a target is missed")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file (the engine's goroutines carry the label side=groundwork: go tool pprof -tagfocus side=groundwork)")
	memProfile := flag.String("memprofile", "", "write the run's allocations, as the runtime samples them, to this file (go tool pprof -sample_index=alloc_space; -focus groundwork/internal shows Groundwork's)")
	jsonOut := flag.String("json-out", "", "also write the results as JSON to this file")
	render := flag.String("render", "", "print the table of a report saved with -json, and check it, instead of measuring")
	flag.Parse()
	if *render != "" {
		os.Exit(renderSaved(*render, o.noCheck))
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	o.dbs = splitList(dbs)
	var err error
	if o.ledgerRows, err = intList(ledger); err != nil {
		fatal(err)
	}
	if o.apiRates, err = intList(rates); err != nil {
		fatal(err)
	}
	if o.scale, err = intList(scale); err != nil {
		fatal(err)
	}
	if !sort.IntsAreSorted(o.scale) {
		fatal(fmt.Errorf("-scale-workers: %q is not in ascending order", scale))
	}
	ctx := context.Background()
	rep := &Report{Date: time.Now().UTC().Format(time.RFC3339), CPUs: runtime.NumCPU(), GoVersion: runtime.Version(),
		Workers: o.workers, Jobs: o.jobs, Command: strings.Join(os.Args, " "), LoadBefore: loadavg()}
	progress := os.Stderr
	for _, d := range o.dbs {
		var r *DBReport
		switch d {
		case "sqlite":
			r, err = runSQLite(ctx, o, progress)
		case "postgres":
			r, err = runPostgres(ctx, o, progress)
		default:
			err = fmt.Errorf("unknown database %q (sqlite or postgres)", d)
		}
		if err != nil {
			fatal(fmt.Errorf("%s: %w", d, err))
		}
		rep.Databases = append(rep.Databases, r)
	}
	rep.LoadAfter = loadavg()
	if *memProfile != "" {
		if err := writeAllocs(*memProfile); err != nil {
			fatal(err)
		}
	}
	rep.check()
	if *jsonOut != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		if err := os.WriteFile(*jsonOut, append(b, '\n'), 0o644); err != nil {
			fatal(err)
		}
	}
	if o.json {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
	} else {
		rep.print(os.Stdout)
	}
	if !o.noCheck && !rep.AllMet {
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

// writeAllocs writes the allocations made since the start (sampled at the runtime's default
// rate) to path.
func writeAllocs(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "bench:", err)
	os.Exit(2)
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func intList(s string) ([]int, error) {
	var out []int
	for _, p := range splitList(s) {
		var n int
		if _, err := fmt.Sscan(p, &n); err != nil || n <= 0 {
			return nil, fmt.Errorf("not a positive number: %q", p)
		}
		out = append(out, n)
	}
	return out, nil
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

func logf(w io.Writer, format string, args ...any) {
	fmt.Fprintf(w, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

func runSQLite(ctx context.Context, o options, w io.Writer) (*DBReport, error) {
	dir, err := os.MkdirTemp("", "gw-bench-sqlite-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "bench.db")
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	rdb, err := sql.Open("sqlite", sqliteURL(path))
	if err != nil {
		return nil, err
	}
	defer rdb.Close()
	// River's SQLite driver, like Groundwork's store, writes through one connection.
	rdb.SetMaxOpenConns(1)
	rr := &riverRunner[*sql.Tx]{driver: riversqlite.New(rdb), workers: o.workers,
		truncate: func(ctx context.Context) error { _, err := rdb.ExecContext(ctx, `DELETE FROM river_job`); return err }}
	r := &DBReport{Database: "sqlite", Settings: "WAL, synchronous=NORMAL, one connection (both)"}
	return r, measure(ctx, o, w, r, &gwRunner{s: s, dialect: "sqlite", spec: path, workers: o.workers, prefetch: o.prefetch}, rr, 0)
}

func runPostgres(ctx context.Context, o options, w io.Writer) (*DBReport, error) {
	url, pid := o.pgURL, 0
	if url == "" {
		admin, p, stop, err := throwawayPostgres(o.pgBin)
		if err != nil {
			return nil, err
		}
		defer stop()
		url, pid = admin, p
	}
	s, err := postgres.Open(ctx, url, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, err
	}
	defer s.Close()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	rr := &riverRunner[pgxTx]{driver: riverpgxv5.New(pool), workers: o.workers,
		truncate: func(ctx context.Context) error { _, err := pool.Exec(ctx, `TRUNCATE river_job`); return err }}
	settings, err := pgSettings(ctx, s.DB())
	if err != nil {
		return nil, err
	}
	var version string
	_ = s.DB().QueryRowContext(ctx, `SHOW server_version`).Scan(&version)
	r := &DBReport{Database: "postgres", Settings: "PostgreSQL " + version + ", " + settings}
	return r, measure(ctx, o, w, r, &gwRunner{s: s, dialect: "postgres", spec: url, workers: o.workers, prefetch: o.prefetch}, rr, pid)
}

// riverClient is what measure needs of a riverRunner, whatever its driver's transaction type.
type riverClient interface {
	migrate(ctx context.Context) error
	throughput(ctx context.Context, n, workers int, m *meter) (Throughput, error)
	latency(ctx context.Context, samples int) (Latency, error)
}

func measure(ctx context.Context, o options, w io.Writer, r *DBReport, gw *gwRunner, rv riverClient, serverPID int) error {
	if err := rv.migrate(ctx); err != nil {
		return fmt.Errorf("river migrate: %w", err)
	}
	var err error
	logf(w, "%s: commit ceiling", r.Database)
	if r.CommitSerial, r.CommitConcurrent, err = commitCeiling(ctx, gw.s.DB(), o.workers, 3*time.Second); err != nil {
		return fmt.Errorf("commit ceiling: %w", err)
	}
	// oneStep runs n 1-step jobs through River and through Groundwork with the given workers,
	// back to back. The two take turns going first (Groundwork when gwFirst), so that a drift
	// of the machine during the run (the disk's sync time wanders by a factor of two) weighs on
	// both alike.
	oneStep := func(label string, n, workers int, gwFirst bool) (river, groundwork Throughput, err error) {
		runRiver := func() (err error) {
			logf(w, "%s %s: river 1-step", r.Database, label)
			river, err = costed(ctx, gw, serverPID, func(m *meter) (Throughput, error) { return rv.throughput(ctx, n, workers, m) })
			return err
		}
		runGroundwork := func() (err error) {
			logf(w, "%s %s: groundwork 1-step", r.Database, label)
			groundwork, err = costed(ctx, gw, serverPID, func(m *meter) (Throughput, error) { return gw.throughput(ctx, 1, n, workers, m) })
			return err
		}
		first, second := runRiver, runGroundwork
		if gwFirst {
			first, second = runGroundwork, runRiver
		}
		if err = first(); err == nil {
			err = second()
		}
		return river, groundwork, err
	}
	for round := 1; round <= o.rounds; round++ {
		rd := Round{Round: round, Load: loadavg()}
		if rd.River1, rd.Groundwork1, err = oneStep(fmt.Sprintf("round %d", round), o.jobs, o.workers, round%2 == 0); err != nil {
			return err
		}
		logf(w, "%s round %d: groundwork 5-step", r.Database, round)
		if rd.Groundwork5, err = costed(ctx, gw, serverPID, func(m *meter) (Throughput, error) { return gw.throughput(ctx, 5, o.jobs/5, o.workers, m) }); err != nil {
			return err
		}
		rd.Ratio = rd.Groundwork1.JobsPerSec / rd.River1.JobsPerSec
		logf(w, "%s round %d: river %.0f jobs/s, groundwork %.0f jobs/s (%.2fx), 5-step %.0f steps/s", r.Database, round,
			rd.River1.JobsPerSec, rd.Groundwork1.JobsPerSec, rd.Ratio, rd.Groundwork5.StepsPerSec)
		r.Rounds = append(r.Rounds, rd)
	}
	for i, n := range o.scale {
		// Enough jobs to run for about a second at any count, at most the rounds' number.
		jobs := min(o.jobs, max(2000, 250*n))
		pt := ScalePoint{Workers: n}
		if pt.River1, pt.Groundwork1, err = oneStep(fmt.Sprintf("scaling, %d workers", n), jobs, n, i%2 == 1); err != nil {
			return err
		}
		r.Scaling = append(r.Scaling, pt)
	}
	logf(w, "%s: claim-to-start", r.Database)
	if r.GroundworkLatency, err = gw.latency(ctx, o.samples); err != nil {
		return err
	}
	if r.RiverLatency, err = rv.latency(ctx, o.samples); err != nil {
		return err
	}
	if o.waiting > 0 {
		logf(w, "%s: %d waiting jobs", r.Database, o.waiting)
		if r.Waiting, err = gw.waiting(ctx, o.waiting, o.waitFor, serverPID); err != nil {
			return err
		}
	}
	if len(o.ledgerRows) > 0 {
		logf(w, "%s: ledger at %v finished rows", r.Database, o.ledgerRows)
		if r.Ledger, err = gw.ledger(ctx, o.ledgerRows, func(n int) { logf(w, "%s: ledger seeded to %d rows", r.Database, n) }); err != nil {
			return err
		}
	}
	if len(o.apiRates) > 0 {
		logf(w, "%s: API", r.Database)
		if r.API, err = apiLoad(ctx, gw, gw.spec, o.apiRates, o.apiFor); err != nil {
			return err
		}
	}
	return gw.clear(ctx)
}

// Throughput is one timed run of n pre-inserted jobs.
type Throughput struct {
	Jobs        int     `json:"jobs"`
	Steps       int     `json:"stepsPerJob"`
	Seconds     float64 `json:"seconds"`
	JobsPerSec  float64 `json:"jobsPerSec"`
	StepsPerSec float64 `json:"stepsPerSec"`
	// WALPerJob is the PostgreSQL write-ahead log written per job: the database work each job
	// costs, whatever the machine's load.
	WALPerJob float64 `json:"walBytesPerJob,omitempty"`
	// ClientCPUPerJob is the CPU this process used per job while the run was timed (on SQLite
	// the database's work included); ServerCPUPerJob is the throwaway PostgreSQL server's.
	// Both in microseconds: on two cores, what the client and the server use per job bounds the
	// rate as much as the commits do.
	ClientCPUPerJob float64 `json:"clientCPUMicrosPerJob,omitempty"`
	ServerCPUPerJob float64 `json:"serverCPUMicrosPerJob,omitempty"`
}

func newThroughput(n, steps int, d time.Duration) Throughput {
	return Throughput{Jobs: n, Steps: steps, Seconds: d.Seconds(), JobsPerSec: float64(n) / d.Seconds(),
		StepsPerSec: float64(n*steps) / d.Seconds()}
}

// Latency is the spread of claim-to-start times.
type Latency struct {
	Samples int     `json:"samples"`
	P50ms   float64 `json:"p50ms"`
	P99ms   float64 `json:"p99ms"`
	Maxms   float64 `json:"maxms"`
}

func newLatency(lat []time.Duration) Latency {
	if len(lat) == 0 {
		return Latency{}
	}
	sort.Slice(lat, func(i, k int) bool { return lat[i] < lat[k] })
	return Latency{Samples: len(lat), P50ms: msOf(pct(lat, 0.50)), P99ms: msOf(pct(lat, 0.99)), Maxms: msOf(lat[len(lat)-1])}
}

func pct(sorted []time.Duration, q float64) time.Duration {
	return sorted[int(q*float64(len(sorted)-1)+0.5)]
}

func msOf(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// renderSaved prints the table of a saved JSON report and returns the exit code its targets
// give.
func renderSaved(path string, noCheck bool) int {
	b, err := os.ReadFile(path)
	if err != nil {
		fatal(err)
	}
	var rep Report
	if err := json.Unmarshal(b, &rep); err != nil {
		fatal(err)
	}
	rep.Targets = nil
	rep.check()
	rep.print(os.Stdout)
	if !noCheck && !rep.AllMet {
		return 1
	}
	return 0
}

// meter takes the CPU used between start and stop: by this process, and by the PostgreSQL
// server when the bench started it (pid not 0).
type meter struct {
	pid              int
	client0, server0 time.Duration
	client, server   time.Duration
}

func (m *meter) start() { m.client0, m.server0 = selfCPU(), serverCPU(m.pid) }

func (m *meter) stop() { m.client, m.server = selfCPU()-m.client0, serverCPU(m.pid)-m.server0 }

// costed runs a throughput run and adds what each job cost: the CPU of the timed part and, on
// PostgreSQL, the log it wrote (the seeding of jobs and River's inserts included: both are part
// of what a job costs).
func costed(ctx context.Context, gw *gwRunner, serverPID int, run func(*meter) (Throughput, error)) (Throughput, error) {
	lsn := func() float64 {
		var v float64
		if gw.dialect == "postgres" {
			_ = gw.s.DB().QueryRowContext(ctx, `SELECT (pg_current_wal_lsn() - '0/0')::float8`).Scan(&v)
		}
		return v
	}
	before := lsn()
	m := &meter{pid: serverPID}
	t, err := run(m)
	if err != nil || t.Jobs == 0 {
		return t, err
	}
	if gw.dialect == "postgres" {
		t.WALPerJob = (lsn() - before) / float64(t.Jobs)
	}
	t.ClientCPUPerJob = float64(m.client.Microseconds()) / float64(t.Jobs)
	t.ServerCPUPerJob = float64(m.server.Microseconds()) / float64(t.Jobs)
	return t, nil
}
