// Package ociimage builds Groundwork's container image from scratch, without a Docker engine
// and without pulling a base image: a statically linked groundwork binary, the CA bundle, a
// passwd/group naming a non-root user and an empty data directory, in two layers whose every
// timestamp is fixed, so one binary always gives one image digest.
package ociimage

import (
	"archive/tar"
	"bytes"
	"debug/buildinfo"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's fixed facts, which the Helm chart and docs/operations.md rely on.
const (
	UID         = 65532
	BinaryPath  = "/usr/bin/groundwork"
	DataDir     = "/var/lib/groundwork"
	Port        = 5087
	CACertsPath = "/etc/ssl/certs/ca-certificates.crt"

	// LabelLocalProvider says what the image leaves out: the local provider starts database
	// servers from the host's binaries, and none are in the image.
	LabelLocalProvider = "io.groundwork.local-provider"
	LocalProviderNote  = "not included: the local provider's PostgreSQL, MariaDB and Redis servers are not in this image; it is for the cloud providers"
)

// Options name the inputs of one build.
type Options struct {
	// Binary is a groundwork binary built with CGO_ENABLED=0 for linux.
	Binary string
	// CACerts is a PEM bundle copied to /etc/ssl/certs/ca-certificates.crt.
	CACerts string
	// Created is every timestamp in the image (SOURCE_DATE_EPOCH).
	Created time.Time
	// Version goes into the org.opencontainers.image.version label.
	Version string
	// Revision goes into org.opencontainers.image.revision; empty leaves it out.
	Revision string
}

// Build assembles the image. It refuses a binary that is not a static linux one, since the
// image has no C library for it to load.
func Build(o Options) (v1.Image, error) {
	info, err := buildinfo.ReadFile(o.Binary)
	if err != nil {
		return nil, fmt.Errorf("read build info of %s: %w", o.Binary, err)
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	if settings["GOOS"] != "linux" {
		return nil, fmt.Errorf("%s is built for GOOS=%q, the image needs linux", o.Binary, settings["GOOS"])
	}
	if settings["CGO_ENABLED"] != "0" {
		return nil, fmt.Errorf("%s is built with CGO_ENABLED=%q, the image has no C library: build it with CGO_ENABLED=0", o.Binary, settings["CGO_ENABLED"])
	}
	bin, err := os.ReadFile(o.Binary)
	if err != nil {
		return nil, fmt.Errorf("read binary: %w", err)
	}
	certs, err := os.ReadFile(o.CACerts)
	if err != nil {
		return nil, fmt.Errorf("read CA certificates: %w", err)
	}
	t := o.Created.UTC()

	base, err := layer(t, baseFiles(certs))
	if err != nil {
		return nil, fmt.Errorf("base layer: %w", err)
	}
	app, err := layer(t, []file{
		{name: "usr/", mode: 0o755, dir: true},
		{name: "usr/bin/", mode: 0o755, dir: true},
		{name: BinaryPath[1:], mode: 0o755, body: bin},
	})
	if err != nil {
		return nil, fmt.Errorf("binary layer: %w", err)
	}

	labels := map[string]string{
		"org.opencontainers.image.title":       "groundwork",
		"org.opencontainers.image.description": "Groundwork server and CLI (cloud providers; " + LocalProviderNote + ")",
		"org.opencontainers.image.version":     o.Version,
		"org.opencontainers.image.created":     t.Format(time.RFC3339),
		"org.opencontainers.image.licenses":    "NOASSERTION",
		LabelLocalProvider:                     LocalProviderNote,
	}
	if o.Revision != "" {
		labels["org.opencontainers.image.revision"] = o.Revision
	}
	user := fmt.Sprintf("%d:%d", UID, UID)
	cfg := &v1.ConfigFile{
		Architecture: settings["GOARCH"],
		OS:           "linux",
		Created:      v1.Time{Time: t},
		Config: v1.Config{
			User:       user,
			Entrypoint: []string{BinaryPath, "serve"},
			Env: []string{
				"PATH=/usr/bin:/bin",
				"GROUNDWORK_DATA_DIR=" + DataDir,
				"SSL_CERT_FILE=" + CACertsPath,
			},
			WorkingDir:   DataDir,
			ExposedPorts: map[string]struct{}{fmt.Sprintf("%d/tcp", Port): {}},
			Volumes:      map[string]struct{}{DataDir: {}},
			Labels:       labels,
		},
		RootFS: v1.RootFS{Type: "layers"},
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, MediaType: types.OCILayer, History: v1.History{
			Created: v1.Time{Time: t}, CreatedBy: "ociimage: CA certificates, passwd, data directory"}},
		mutate.Addendum{Layer: app, MediaType: types.OCILayer, History: v1.History{
			Created: v1.Time{Time: t}, CreatedBy: "ociimage: " + BinaryPath}},
	)
	if err != nil {
		return nil, fmt.Errorf("append layers: %w", err)
	}
	annotated, ok := mutate.Annotations(img, map[string]string{
		"org.opencontainers.image.title":   "groundwork",
		"org.opencontainers.image.version": o.Version,
		"org.opencontainers.image.created": t.Format(time.RFC3339),
		LabelLocalProvider:                 LocalProviderNote,
	}).(v1.Image)
	if !ok {
		return nil, errors.New("annotate manifest: not an image")
	}
	return annotated, nil
}

// WriteLayout writes img as a fresh OCI image layout in dir, tagged ref.
func WriteLayout(dir, ref string, img v1.Image) error {
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": ref,
	})); err != nil {
		return fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	return nil
}

// WriteTarball writes img as a tarball that `docker load` and `podman load` read.
func WriteTarball(path, ref string, img v1.Image) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return fmt.Errorf("image reference %q: %w", ref, err)
	}
	if err := tarball.WriteToFile(path, tag, img); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

type file struct {
	name string
	mode int64
	uid  int
	dir  bool
	body []byte
}

// baseFiles is what a distroless static base holds: no shell, no package manager.
func baseFiles(certs []byte) []file {
	return []file{
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/passwd", mode: 0o644, body: []byte(
			"root:x:0:0:root:/root:/sbin/nologin\n" +
				fmt.Sprintf("nonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", UID, UID))},
		{name: "etc/group", mode: 0o644, body: []byte(fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", UID))},
		{name: "etc/nsswitch.conf", mode: 0o644, body: []byte("hosts: files dns\n")},
		{name: "etc/ssl/", mode: 0o755, dir: true},
		{name: "etc/ssl/certs/", mode: 0o755, dir: true},
		{name: CACertsPath[1:], mode: 0o644, body: certs},
		{name: "home/", mode: 0o755, dir: true},
		{name: "home/nonroot/", mode: 0o700, uid: UID, dir: true},
		{name: "root/", mode: 0o700, dir: true},
		// With a read-only root filesystem /tmp must be mounted; the directory is its mount point.
		{name: "tmp/", mode: 0o1777, dir: true},
		{name: "var/", mode: 0o755, dir: true},
		{name: "var/lib/", mode: 0o755, dir: true},
		{name: DataDir[1:] + "/", mode: 0o700, uid: UID, dir: true},
	}
}

// layer writes files into one uncompressed tar with fixed owners and times; go-containerregistry
// compresses it, and gzip of the same bytes is the same bytes.
func layer(t time.Time, files []file) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{
			Name: f.name, Mode: f.mode, Uid: f.uid, Gid: f.uid, ModTime: t,
			Format: tar.FormatPAX, Typeflag: tar.TypeReg, Size: int64(len(f.body)),
		}
		if f.dir {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("tar %s: %w", f.name, err)
		}
		if _, err := tw.Write(f.body); err != nil {
			return nil, fmt.Errorf("tar %s: %w", f.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("tar: %w", err)
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// Result is what WriteAll wrote.
type Result struct {
	Digest           v1.Hash
	Layers           int
	CompressedSize   int64 // manifest, config and compressed layers: what a registry stores
	UncompressedSize int64 // the layers' tar bytes: what a node unpacks
}

// WriteAll builds the image and writes dir/oci (OCI layout), dir/groundwork.tar and
// dir/sbom.cdx.json, replacing what a previous build left there.
func WriteAll(dir, ref string, o Options) (Result, error) {
	img, err := Build(o)
	if err != nil {
		return Result{}, err
	}
	digest, err := img.Digest()
	if err != nil {
		return Result{}, fmt.Errorf("digest: %w", err)
	}
	res := Result{Digest: digest}
	if res.CompressedSize, res.UncompressedSize, res.Layers, err = sizes(img); err != nil {
		return Result{}, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Result{}, fmt.Errorf("mkdir %s: %w", dir, err)
	}
	layoutDir := filepath.Join(dir, "oci")
	if err := os.RemoveAll(layoutDir); err != nil {
		return Result{}, fmt.Errorf("remove old layout: %w", err)
	}
	if err := WriteLayout(layoutDir, ref, img); err != nil {
		return Result{}, err
	}
	if err := WriteTarball(filepath.Join(dir, "groundwork.tar"), ref, img); err != nil {
		return Result{}, err
	}
	bom, err := SBOM(o, digest)
	if err != nil {
		return Result{}, err
	}
	f, err := os.Create(filepath.Join(dir, "sbom.cdx.json"))
	if err != nil {
		return Result{}, fmt.Errorf("create SBOM: %w", err)
	}
	if err := WriteSBOM(f, bom); err != nil {
		f.Close()
		return Result{}, err
	}
	if err := f.Close(); err != nil {
		return Result{}, fmt.Errorf("write SBOM: %w", err)
	}
	return res, nil
}

func sizes(img v1.Image) (compressed, uncompressed int64, n int, err error) {
	m, err := img.RawManifest()
	if err != nil {
		return 0, 0, 0, fmt.Errorf("manifest: %w", err)
	}
	c, err := img.RawConfigFile()
	if err != nil {
		return 0, 0, 0, fmt.Errorf("config: %w", err)
	}
	compressed = int64(len(m) + len(c))
	layers, err := img.Layers()
	if err != nil {
		return 0, 0, 0, fmt.Errorf("layers: %w", err)
	}
	for _, l := range layers {
		s, err := l.Size()
		if err != nil {
			return 0, 0, 0, fmt.Errorf("layer size: %w", err)
		}
		compressed += s
		rc, err := l.Uncompressed()
		if err != nil {
			return 0, 0, 0, fmt.Errorf("layer: %w", err)
		}
		u, err := io.Copy(io.Discard, rc)
		rc.Close()
		if err != nil {
			return 0, 0, 0, fmt.Errorf("layer: %w", err)
		}
		uncompressed += u
	}
	return compressed, uncompressed, len(layers), nil
}
