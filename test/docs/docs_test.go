// Package docs runs every CLI and curl example of README.md and docs/*.md, as a new user would,
// against a live Groundwork server on the local provider: the groundwork binary is built from
// this tree, `groundwork serve` runs as a child process, and each documented command runs in a
// shell with the ids earlier commands printed in place of the docs' placeholders (spc_…, job_…).
// Examples that cannot run here are listed in skipped with the reason; an example that is
// neither run nor listed, or a command outside a shell block, fails the test, so the docs and
// the product cannot drift apart unnoticed.
package docs

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/provider/local/localtest"
)

// skipped are the examples this test does not run, each with why. An entry no longer in the
// docs fails the test, so the list does not outlive what it excuses.
var skipped = map[string]string{
	"./scripts/run.sh":  "installs packages and serves on :5087 in the foreground; the test runs the same binary's serve itself",
	"./scripts/test.sh": "runs the whole test suite, this test included",
	"go test -run '^$' -bench . -benchtime 2000x ./internal/engine/":                                                      "a benchmark: minutes of CPU, not an example of the product",
	"groundwork spaces register-cluster --name prod-eu --kubeconfig ~/.kube/config":                                       "needs a Kubernetes cluster (covered by test/components on a real kube-apiserver)",
	"groundwork spaces register-cluster --name prod --kubeconfig ./prod.kubeconfig":                                       "needs a Kubernetes cluster (covered by test/components)",
	"groundwork spaces register-cluster --name prod --endpoint https://10.0.0.1:6443 --ca-file ca.crt --token-file token": "needs a Kubernetes cluster (covered by test/components)",
	"groundwork components install ingress-nginx --space spc_…":                                                           "needs a registered Kubernetes cluster space (covered by test/components)",
	"groundwork components install ingress-nginx --space spc_… --set controller.service.type=NodePort":                    "needs a registered Kubernetes cluster space (covered by test/components)",
	"groundwork components uninstall job_…":                                                                               "needs an installed component (covered by test/components)",
	"cd examples/provisioner": "the test builds examples/provisioner and runs it on the documented address before the examples, since the README registers it",
	"go run . -addr 127.0.0.1:8081 -root /tmp/buckets -work-delay 2s": "run by the test as a fixture (built, same flags, root in a temp dir), see cd examples/provisioner",
	// Operator procedures on a host's own paths and services; each is proven by a test of its own.
	"groundwork backup --data-dir /var/lib/groundwork --to /backups/gw-$(date +%F).tar.gz":                 "an operator's host paths; test/backup backs up a running server and restores it",
	"groundwork restore --data-dir /var/lib/groundwork --from /backups/gw-2026-11-30.tar.gz":               "an operator's host paths; test/backup restores and resumes the jobs",
	"cp secret.key /var/lib/groundwork/secret.key":                                                         "part of the restore procedure above (test/backup puts the key back the same way)",
	"groundwork serve --data-dir /var/lib/groundwork":                                                      "serves in the foreground; the test runs serve itself",
	`pg_dump --format=custom --file=groundwork.dump "$GROUNDWORK_DATABASE"`:                                "needs the operator's PostgreSQL database",
	"tar -czf groundwork-secrets.tar.gz -C /var/lib/groundwork secrets":                                    "part of the PostgreSQL backup procedure above",
	`pg_restore --clean --if-exists --no-owner --dbname="$GROUNDWORK_DATABASE" groundwork.dump`:            "needs the operator's PostgreSQL database",
	"tar -xzf groundwork-secrets.tar.gz -C /var/lib/groundwork":                                            "part of the PostgreSQL restore procedure above",
	"go test ./test/aws -run TestFamiliesSurviveLostAnswers":                                               "a test suite of its own, run by the test command",
	"go test ./internal/provider/aws -run TestNetworkSurvivesLostAnswers":                                  "a test suite of its own, run by the test command",
	"GROUNDWORK_FAULT_SEEDS=50 go test ./test/aws -run TestFamiliesSurviveLostAnswers -timeout 60m":        "a long fault run (up to an hour), not an example of the product",
	"GROUNDWORK_FAULT_SEED=17 go test ./test/aws -run 'TestFamiliesSurviveLostAnswers/seed=17/network' -v": "a test replay, run by hand",
	"CGO_ENABLED=0 go build -trimpath -o bin/groundwork ./cmd/groundwork":                                  "the test builds the same binary itself",
	"bin/groundwork serve": "serves in the foreground; the test runs serve itself",
	"scripts/image.sh":     "builds the container image; internal/ociimage tests the builder, reproducibility included",
	"kubectl create secret generic groundwork-database --from-literal=url='postgres://groundwork:…@db:5432/groundwork'":                                         "needs a Kubernetes cluster (test/deploy applies the chart to a real kube-apiserver)",
	`kubectl create secret generic groundwork-secret-key --from-literal=key="$(head -c 32 /dev/urandom | base64)"`:                                              "needs a Kubernetes cluster (test/deploy)",
	"helm install gw deploy/helm/groundwork --set image.repository=registry.example.com/groundwork --set image.tag=v1.0.0":                                      "needs a Kubernetes cluster (test/deploy lints, renders and applies the chart)",
	"OTEL_EXPORTER_OTLP_ENDPOINT=http://otel-collector:4318 groundwork serve":                                                                                   "serves in the foreground; test/tracing runs serve with an OTLP receiver",
	"groundwork remediations create --space spc_… --recommendation rec_idle_vm --action stop --resource-type ec2-instance --subject i-0123456789abcdef0 --wait": "needs an AWS account (test/aws TestRemediationStopEC2Approved runs it against moto)",
	`groundwork remediations approve job_… --step-id 5b0c2f1e-4d1a-4c59-9d0e-3f6a1c2b7e02 --reason "off-hours window" --wait`:                                   "needs an AWS account (test/aws TestRemediationStopEC2Approved approves by id against moto)",
	"groundwork plan -f examples/specs/aws/vm-pool-lb.yaml --space spc_…":                                                                                       "needs an AWS space (test/plan plans every AWS example spec against golden files)",
	"groundwork pricing refresh --aws AmazonEC2-us-east-1.json --aws AmazonRDS-us-east-1.json --azure retail-prices.json --gcp compute-skus.json -w book.json":  "reads price lists fetched from the clouds; cmd/groundwork TestPricingRefreshCommand runs it on recorded answers",
}

// refused are examples that run and whose refusal in the docs' order is the documented
// behaviour: the tour's job has completed, and retry and cancel are for jobs that have not.
var refused = map[string]string{
	"groundwork jobs retry job_…":  "409",
	"groundwork jobs cancel job_…": "use 'groundwork jobs delete",
}

// want are strings an example's output must hold, beside its exit status 0.
var want = map[string][]string{
	"groundwork jobs create -f examples/specs/postgres.yaml --watch": {"COMPLETED"},
	"groundwork jobs list":                               {"checkout-db"},
	"groundwork catalog types managed-resource/postgres": {"SETTINGS", "allocatedStorageGB", "OUTPUTS"},
	"groundwork jobs delete job_… --watch":               {"DELETED"},
	"groundwork remediations create --space spc_… --recommendation rec_idle_vm --action pause --resource-type vm --subject vm-idle-1 --wait": {"awaiting_user", "approval"},
	`groundwork remediations reject job_… --step approval --reason "needed for the demo" --wait`:                                             {"cancelled"},
	"groundwork remediations audit job_…":                                               {"rejected", "needed for the demo"},
	`curl -s -o /dev/null -w '%{http_code} %{content_type}\n' "$GROUNDWORK_URL/"`:       {"200 text/html"},
	`curl -s -o /dev/null -w '%{http_code} %{redirect_url}\n' "$GROUNDWORK_URL/zopday"`: {"301 ", "/"},
	"groundwork orgs create --name Acme --admin-email ops@acme.example.com":             {"database: SQLite", "created"},
	"groundwork plan -f examples/specs/postgres.yaml --space spc_…":                     {"create_server", "local: no cloud cost", "total: 0.00 USD/month"},
	"groundwork discover networks --space spc_…":                                        {"127.0.0.0/8"},
	`curl -sS -H "Authorization: Bearer $GROUNDWORK_TOKEN" -H "Groundwork-Space: spc_…" -d '{"kind":"managed-resource","type":"redis","application":"cache","settings":{"name":"cache"}}' http://localhost:5087/provisioner/plan`:  {`"outcome":"succeeded"`, `"action":"create"`},
	`curl -sS -H "Authorization: Bearer $GROUNDWORK_TOKEN" -H "Groundwork-Space: spc_…" -d '{"kind":"managed-resource","type":"redis","application":"cache","settings":{"name":"cache"}}' http://localhost:5087/provisioner/apply`: {`"outcome":"accepted"`},
}

// shells are the fence languages whose lines are commands.
var shells = []string{"sh", "bash", "shell", "console"}

// example is one documented command.
type example struct {
	file string
	line int
	cmd  string
}

func (e example) String() string { return fmt.Sprintf("%s:%d: %s", e.file, e.line, e.cmd) }

// commandLike matches a line of a non-shell block that is a command all the same.
var commandLike = regexp.MustCompile(`^\s*(\$\s*)?(groundwork|curl|go run|\./scripts/)\b`)

// extract reads the examples of one Markdown file: the commands of its shell blocks (with
// continuation lines joined and comments dropped), and, as strays, command lines in other blocks.
func extract(t *testing.T, path, name string) (examples, strays []example) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var inBlock, shell bool
	var pending string
	pendingLine := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if fence, ok := strings.CutPrefix(strings.TrimSpace(line), "```"); ok {
			if !inBlock {
				inBlock, shell = true, slices.Contains(shells, strings.TrimSpace(fence))
			} else {
				inBlock = false
			}
			continue
		}
		if !inBlock {
			continue
		}
		if !shell {
			if commandLike.MatchString(line) {
				strays = append(strays, example{name, n, strings.TrimSpace(line)})
			}
			continue
		}
		text := strings.TrimSpace(stripComment(line))
		if pending == "" {
			pendingLine = n
		}
		if cont, ok := strings.CutSuffix(text, `\`); ok {
			pending += strings.TrimSpace(cont) + " "
			continue
		}
		text = strings.TrimSpace(pending + text)
		pending = ""
		if text != "" {
			examples = append(examples, example{name, pendingLine, text})
		}
	}
	return examples, strays
}

// stripComment drops a trailing "# …" that is outside quotes and starts a word.
func stripComment(line string) string {
	var quote rune
	for i, r := range line {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == '#' && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t'):
			return line[:i]
		}
	}
	return line
}

// docFiles are README.md, then docs/*.md in name order: the README's tour makes what the
// other pages' examples use (a space, a datastore job, the user dev@example.com).
func docFiles(t *testing.T, root string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(files)
	return append([]string{filepath.Join(root, "README.md")}, files...)
}

func repoRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}

// TestDocsExamplesAreRunOrListed needs no server: it checks the bookkeeping alone, so that a
// new example in the wrong kind of block fails at once.
func TestDocsExamplesAreRunOrListed(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	seen := map[string]bool{}
	for _, f := range docFiles(t, root) {
		rel, _ := filepath.Rel(root, f)
		ex, strays := extract(t, f, rel)
		for _, s := range strays {
			t.Errorf("%s is a command in a block that is not ```sh: make it a sh block (so that it is run or listed here) or not a command", s)
		}
		for _, e := range ex {
			seen[e.cmd] = true
		}
	}
	for _, m := range []map[string]string{skipped, refused} {
		for cmd := range m {
			if !seen[cmd] {
				t.Errorf("listed example %q is in no doc any more: drop it from the list", cmd)
			}
		}
	}
	for cmd := range want {
		if !seen[cmd] {
			t.Errorf("example %q with expected output is in no doc any more", cmd)
		}
	}
	if len(seen) < 30 {
		t.Errorf("only %d examples found: is the extraction broken?", len(seen))
	}
}

// placeholders are the docs' stand-ins and the variable (an id an earlier example printed) each
// one is replaced by; the server's address stands for the documented default.
var placeholders = []struct{ text, key string }{
	{"<the bootstrap token>", "token"},
	{"http://localhost:5087", "url"},
	{"local:sec_…", "secret"},
	{"spc_…", "spc"},
	{"job_…", "job"},
	{"db_…", "db"},
	{"tok_…", "tok"},
}

// captures find the ids an example printed; only examples that make something are read, so a
// list does not replace the id of what the tour made.
var captures = map[string]*regexp.Regexp{
	"spc":    regexp.MustCompile(`\b(spc_[A-Za-z0-9]+)`),
	"job":    regexp.MustCompile(`\b(job_[A-Za-z0-9]+)`),
	"db":     regexp.MustCompile(`(?:^|[^A-Za-z0-9_])(db_[A-Za-z0-9]+)`),
	"secret": regexp.MustCompile(`\b(local:sec_[A-Za-z0-9_-]+)`),
	"tok":    regexp.MustCompile(`\b(tok_[A-Za-z0-9]+)`),
}

var makes = regexp.MustCompile(`^groundwork \S+ (create|register)\b`)

// TestDocsExamples runs every example against a live server.
func TestDocsExamples(t *testing.T) {
	for _, e := range []datastore.Engine{datastore.EnginePostgres, datastore.EngineRedis} {
		localtest.RequireEngine(t, e)
	}
	root := repoRoot(t)
	bin := t.TempDir()
	build := func(dir, out, pkg string) {
		cmd := exec.Command("go", "build", "-o", filepath.Join(bin, out), pkg)
		cmd.Dir = dir
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", pkg, err, b)
		}
	}
	build(root, "groundwork", "./cmd/groundwork")
	build(filepath.Join(root, "examples", "provisioner"), "bucket-provisioner", ".")

	dataDir := localtest.DataDir(t)
	home := t.TempDir()
	token := "gw_docs_" + strings.Repeat("x", 32)
	addr := freeAddr(t)
	url := "http://" + addr
	env := append(os.Environ(), "HOME="+home, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"GROUNDWORK_URL="+url, "GROUNDWORK_DATA_DIR="+dataDir, "GROUNDWORK_TOKEN=", "GROUNDWORK_SPACE=")
	env = slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "GROUNDWORK_DATABASE=") })

	srvLog := filepath.Join(t.TempDir(), "server.log")
	background(t, "serve", srvLog, root, append(slices.Clone(env), "GROUNDWORK_BOOTSTRAP_TOKEN="+token),
		filepath.Join(bin, "groundwork"), "serve", "--addr", addr, "--data-dir", dataDir)
	waitHTTP(t, url+"/readyz", srvLog)
	// The docs name the example provisioner's address; something else answering there would
	// make the examples pass against it.
	if l, err := net.Listen("tcp", "127.0.0.1:8081"); err != nil {
		t.Fatalf("127.0.0.1:8081, the example provisioner's documented address, is taken: %v", err)
	} else {
		l.Close()
	}
	provLog := filepath.Join(t.TempDir(), "provisioner.log")
	background(t, "provisioner", provLog, root, env, filepath.Join(bin, "bucket-provisioner"),
		"-addr", "127.0.0.1:8081", "-root", t.TempDir(), "-work-delay", "200ms")
	waitHTTP(t, "http://127.0.0.1:8081/healthz", provLog)
	// Local datastore servers outlive serve (they are resources): tear down every job the
	// examples made while the server still runs, then stop it.
	t.Cleanup(func() { teardown(t, url, token) })

	vars := map[string]string{"url": url}
	for _, f := range docFiles(t, root) {
		rel, _ := filepath.Rel(root, f)
		examples, _ := extract(t, f, rel)
		for _, e := range examples {
			if reason, ok := skipped[e.cmd]; ok {
				t.Logf("skip %s (%s)", e, reason)
				continue
			}
			vars["token"] = token
			cmd := e.cmd
			for _, p := range placeholders {
				if strings.Contains(cmd, p.text) {
					v := vars[p.key]
					if v == "" {
						t.Fatalf("%s: no earlier example printed a value for %s", e, p.text)
					}
					cmd = strings.ReplaceAll(cmd, p.text, v)
				}
			}
			if strings.Contains(cmd, "…") {
				t.Fatalf("%s: a placeholder the test does not know", e)
			}
			if name, value, ok := strings.Cut(strings.TrimPrefix(cmd, "export "), "="); strings.HasPrefix(cmd, "export ") && ok {
				env = append(env, name+"="+value)
				continue
			}
			out, err := runShell(root, env, cmd)
			if want, ok := refused[e.cmd]; ok {
				if err == nil || !strings.Contains(out, want) {
					t.Fatalf("%s: want a refusal holding %q, got %v\n%s", e, want, err, out)
				}
				continue
			}
			if err != nil {
				t.Fatalf("%s: %v\n%s\nserver log: %s", e, err, out, srvLog)
			}
			for _, w := range want[e.cmd] {
				if !strings.Contains(out, w) {
					t.Fatalf("%s: output lacks %q:\n%s", e, w, out)
				}
			}
			if makes.MatchString(e.cmd) || strings.HasPrefix(e.cmd, "groundwork connections create") {
				for k, re := range captures {
					if m := re.FindStringSubmatch(out); m != nil {
						vars[k] = m[1]
					}
				}
			}
		}
	}
}

// runShell runs one example as a user's shell would, from the repository root.
func runShell(dir string, env []string, cmd string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, "sh", "-c", cmd)
	c.Dir, c.Env = dir, env
	out, err := c.CombinedOutput()
	return string(out), err
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// background starts a process logging to logFile; it is stopped (SIGTERM, then SIGKILL after
// 30s) when the test ends. Cleanups registered later run first: the teardown of the jobs runs
// while the server still serves.
func background(t *testing.T, what, logFile, dir string, env []string, name string, args ...string) *exec.Cmd {
	t.Helper()
	f, err := os.Create(logFile)
	if err != nil {
		t.Fatal(err)
	}
	c := exec.Command(name, args...)
	c.Dir, c.Env, c.Stdout, c.Stderr = dir, env, f, f
	if err := c.Start(); err != nil {
		t.Fatalf("start %s: %v", what, err)
	}
	done := make(chan struct{})
	go func() { _ = c.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = c.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = c.Process.Kill()
			<-done
		}
		f.Close()
	})
	return c
}

// waitHTTP waits until url answers 200, failing with the log after a minute.
func waitHTTP(t *testing.T, url, logFile string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(logFile)
			t.Fatalf("%s did not answer 200 within a minute (%v):\n%s", url, err, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// teardown deletes every job that still holds something and waits for the teardowns, so that
// no local datastore server outlives the test.
func teardown(t *testing.T, url, token string) {
	t.Helper()
	call := func(method, path string, out any) error {
		req, err := http.NewRequest(method, url+path, nil)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode >= 400 {
			return fmt.Errorf("%s %s: %d", method, path, resp.StatusCode)
		}
		if out == nil {
			return nil
		}
		return json.NewDecoder(resp.Body).Decode(out)
	}
	deadline := time.Now().Add(3 * time.Minute)
	asked := map[string]bool{}
	for {
		var page struct {
			Data []struct {
				ID, Status, Phase string
			} `json:"data"`
		}
		if err := call("GET", "/api/provisioning-jobs?limit=200", &page); err != nil {
			t.Errorf("list jobs for teardown: %v", err)
			return
		}
		live := 0
		for _, j := range page.Data {
			switch j.Status {
			case "deleted", "cancelled":
				continue
			case "completed", "failed":
				if !asked[j.ID] {
					asked[j.ID] = true
					if err := call("DELETE", "/api/provisioning-jobs/"+j.ID, nil); err != nil {
						t.Errorf("tear down %s: %v", j.ID, err)
					}
				} else if j.Status == "failed" {
					t.Errorf("teardown of %s failed", j.ID)
					return
				}
			}
			live++
		}
		if live == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("jobs still live after 3 minutes of teardown: %+v", page.Data)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}
