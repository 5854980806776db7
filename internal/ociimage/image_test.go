package ociimage_test

import (
	"archive/tar"
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/groundworkhq/groundwork/internal/ociimage"
)

// buildTiny builds testdata/tiny the way scripts/image.sh builds groundwork.
func buildTiny(t *testing.T, cgo string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "tiny")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w -buildid=", "-o", bin, "./testdata/tiny")
	cmd.Env = append(os.Environ(), "CGO_ENABLED="+cgo, "GOOS=linux")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func caCerts(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(p, []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestImageIsReproducibleAndLocked(t *testing.T) {
	t.Parallel()
	o := ociimage.Options{Binary: buildTiny(t, "0"), CACerts: caCerts(t), Version: "1.2.3",
		Created: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}

	var digests []string
	var dirs []string
	for range 2 {
		dir := t.TempDir()
		res, err := ociimage.WriteAll(dir, "groundwork:1.2.3", o)
		if err != nil {
			t.Fatal(err)
		}
		digests = append(digests, res.Digest.String())
		dirs = append(dirs, dir)
	}
	if digests[0] != digests[1] {
		t.Fatalf("two builds of one binary gave two digests: %v", digests)
	}
	for _, f := range []string{"groundwork.tar", "sbom.cdx.json", "oci/index.json"} {
		a, _ := os.ReadFile(filepath.Join(dirs[0], f))
		b, _ := os.ReadFile(filepath.Join(dirs[1], f))
		if len(a) == 0 || !bytes.Equal(a, b) {
			t.Errorf("%s differs between builds (or is empty)", f)
		}
	}

	// The layout and the tarball hold the same image, readable back.
	idx, err := layout.ImageIndexFromPath(filepath.Join(dirs[0], "oci"))
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 || im.Manifests[0].Digest.String() != digests[0] {
		t.Fatalf("layout index: %+v, want one manifest %s", im.Manifests, digests[0])
	}
	img, err := tarball.ImageFromPath(filepath.Join(dirs[0], "groundwork.tar"), nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.Config
	if c.User != "65532:65532" {
		t.Errorf("User = %q, want 65532:65532", c.User)
	}
	if strings.Join(c.Entrypoint, " ") != ociimage.BinaryPath+" serve" {
		t.Errorf("Entrypoint = %v", c.Entrypoint)
	}
	if _, ok := c.Volumes[ociimage.DataDir]; !ok {
		t.Errorf("Volumes = %v, want %s", c.Volumes, ociimage.DataDir)
	}
	if !strings.Contains(c.Labels[ociimage.LabelLocalProvider], "not in this image") {
		t.Errorf("label %s = %q", ociimage.LabelLocalProvider, c.Labels[ociimage.LabelLocalProvider])
	}
	if cfg.Architecture != runtime.GOARCH || cfg.OS != "linux" || !cfg.Created.Equal(o.Created) {
		t.Errorf("platform/created = %s/%s %v", cfg.OS, cfg.Architecture, cfg.Created)
	}

	// The files: what a non-root, read-only-root container needs, owned as it needs them.
	files := map[string]*tar.Header{}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if !h.ModTime.Equal(o.Created) {
				t.Errorf("%s: mtime %v, want %v", h.Name, h.ModTime, o.Created)
			}
			if h.Name == "etc/passwd" {
				b, _ := io.ReadAll(tr)
				if !strings.Contains(string(b), "nonroot:x:65532:65532:") {
					t.Errorf("etc/passwd has no uid 65532 user:\n%s", b)
				}
			}
			files[h.Name] = h
		}
		rc.Close()
	}
	for name, want := range map[string]struct {
		uid  int
		mode int64
	}{
		strings.TrimPrefix(ociimage.BinaryPath, "/"):    {0, 0o755},
		strings.TrimPrefix(ociimage.CACertsPath, "/"):   {0, 0o644},
		strings.TrimPrefix(ociimage.DataDir, "/") + "/": {65532, 0o700},
		"tmp/": {0, 0o1777},
	} {
		h := files[name]
		if h == nil {
			t.Errorf("%s missing from the image", name)
			continue
		}
		if h.Uid != want.uid || h.Mode != want.mode {
			t.Errorf("%s: uid %d mode %o, want uid %d mode %o", name, h.Uid, h.Mode, want.uid, want.mode)
		}
	}
	if _, ok := files["bin/sh"]; ok {
		t.Error("the image has a shell")
	}

	// The SBOM lists exactly the modules `go version -m` reads from the binary, and the image by digest.
	f, err := os.Open(filepath.Join(dirs[0], "sbom.cdx.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var bom cdx.BOM
	if err := cdx.NewBOMDecoder(f, cdx.BOMFileFormatJSON).Decode(&bom); err != nil {
		t.Fatal(err)
	}
	if bom.Metadata == nil || bom.Metadata.Component == nil || !strings.Contains(bom.Metadata.Component.PackageURL, strings.TrimPrefix(digests[0], "sha256:")) {
		t.Fatalf("SBOM metadata component does not name the image digest %s: %+v", digests[0], bom.Metadata)
	}
	var got []string
	for _, c := range *bom.Components {
		if c.Type == cdx.ComponentTypeLibrary && c.Name != "stdlib" {
			got = append(got, c.Name+"@"+c.Version)
		}
	}
	want := goVersionDeps(t, o.Binary)
	sort.Strings(got)
	if len(want) == 0 || strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("SBOM modules:\n%s\nwant (go version -m):\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// goVersionDeps reads the dependency list with the go command, independently of debug/buildinfo.
func goVersionDeps(t *testing.T, bin string) []string {
	t.Helper()
	out, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatalf("go version -m: %v", err)
	}
	var deps []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 3 && f[0] == "dep" {
			deps = append(deps, f[1]+"@"+f[2])
		}
		if len(f) >= 3 && f[0] == "=>" && len(deps) > 0 {
			deps[len(deps)-1] = f[1] + "@" + f[2]
		}
	}
	sort.Strings(deps)
	return deps
}

func TestBuildRefusesACgoBinary(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("gcc"); err != nil {
		// CI has one (the race detector needs it), so there the check must run.
		if os.Getenv("CI") == "true" {
			t.Fatalf("no C compiler for a cgo build in CI: %v", err)
		}
		t.Skip("no C compiler for a cgo build")
	}
	_, err := ociimage.Build(ociimage.Options{Binary: buildTiny(t, "1"), CACerts: caCerts(t), Created: time.Unix(0, 0)})
	if err == nil || !strings.Contains(err.Error(), "CGO_ENABLED") {
		t.Fatalf("Build of a cgo binary: err = %v, want one naming CGO_ENABLED", err)
	}
}
