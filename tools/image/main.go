// Command image writes Groundwork's container image as an OCI layout and a tarball, with a
// CycloneDX SBOM beside them, from a groundwork binary already built (scripts/image.sh builds it).
// Every timestamp comes from SOURCE_DATE_EPOCH, so the same binary gives the same digest.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/groundworkhq/groundwork/internal/ociimage"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run() error {
	var o ociimage.Options
	var out, ref string
	flag.StringVar(&o.Binary, "binary", "bin/image/groundwork", "static linux groundwork binary")
	flag.StringVar(&o.CACerts, "ca-certs", "/etc/ssl/certs/ca-certificates.crt", "PEM CA bundle for the image")
	flag.StringVar(&o.Version, "version", "dev", "image version label")
	flag.StringVar(&o.Revision, "revision", "", "source revision label")
	flag.StringVar(&out, "out", "bin/image", "output folder")
	flag.StringVar(&ref, "ref", "", "image reference in the tarball and layout (default groundwork:<version>)")
	flag.Parse()
	if ref == "" {
		ref = "groundwork:" + o.Version
	}
	epoch := os.Getenv("SOURCE_DATE_EPOCH")
	if epoch == "" {
		return fmt.Errorf("SOURCE_DATE_EPOCH is not set; the image's timestamps come from it")
	}
	sec, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil {
		return fmt.Errorf("SOURCE_DATE_EPOCH=%q: %w", epoch, err)
	}
	o.Created = time.Unix(sec, 0).UTC()

	res, err := ociimage.WriteAll(out, ref, o)
	if err != nil {
		return err
	}
	fmt.Printf("digest %s\n", res.Digest)
	fmt.Printf("size   %d bytes compressed (%d layers), %d bytes uncompressed\n", res.CompressedSize, res.Layers, res.UncompressedSize)
	fmt.Printf("layout %s\ntarball %s\nsbom   %s\n", filepath.Join(out, "oci"), filepath.Join(out, "groundwork.tar"), filepath.Join(out, "sbom.cdx.json"))
	return nil
}
