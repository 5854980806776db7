package ociimage

import (
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// SBOM describes the image as CycloneDX: the image, the groundwork binary in it, the Go
// standard library and every module the binary's embedded build info lists (what `go version -m`
// prints), and the CA bundle by its SHA-256. The serial number derives from the image digest and
// the timestamp is the build's, so the same image always gives the same SBOM.
func SBOM(o Options, digest v1.Hash) (*cdx.BOM, error) {
	info, err := buildinfo.ReadFile(o.Binary)
	if err != nil {
		return nil, fmt.Errorf("read build info of %s: %w", o.Binary, err)
	}
	certs, err := os.ReadFile(o.CACerts)
	if err != nil {
		return nil, fmt.Errorf("read CA certificates: %w", err)
	}
	certSum := sha256.Sum256(certs)

	imageRef := "pkg:oci/groundwork@" + strings.ReplaceAll(digest.String(), ":", "%3A")
	binRef := purl(info.Main.Path, info.Main.Version)
	goRef := "pkg:golang/stdlib@" + info.GoVersion

	components := []cdx.Component{
		{
			BOMRef: binRef, Type: cdx.ComponentTypeApplication, Name: info.Main.Path,
			Version: info.Main.Version, PackageURL: binRef,
			Properties: buildSettings(info),
		},
		{BOMRef: goRef, Type: cdx.ComponentTypeLibrary, Name: "stdlib", Version: info.GoVersion, PackageURL: goRef},
		{
			BOMRef: "file:" + CACertsPath, Type: cdx.ComponentTypeFile, Name: CACertsPath,
			Hashes: &[]cdx.Hash{{Algorithm: cdx.HashAlgoSHA256, Value: hex.EncodeToString(certSum[:])}},
		},
	}
	binDeps := []string{goRef}
	for _, m := range info.Deps {
		if m.Replace != nil {
			m = m.Replace
		}
		ref := purl(m.Path, m.Version)
		c := cdx.Component{BOMRef: ref, Type: cdx.ComponentTypeLibrary, Name: m.Path, Version: m.Version, PackageURL: ref}
		if m.Sum != "" {
			// The go.sum hash is a hash of the module's file tree, not of one artefact, so it is a
			// property rather than a CycloneDX hash.
			c.Properties = &[]cdx.Property{{Name: "golang:go.sum", Value: m.Sum}}
		}
		components = append(components, c)
		binDeps = append(binDeps, ref)
	}
	sort.Strings(binDeps[1:])

	bom := cdx.NewBOM()
	bom.SerialNumber = serial(digest)
	bom.Metadata = &cdx.Metadata{
		Timestamp: o.Created.UTC().Format(time.RFC3339),
		Component: &cdx.Component{
			BOMRef: imageRef, Type: cdx.ComponentTypeContainer, Name: "groundwork", Version: o.Version,
			PackageURL:  imageRef,
			Description: LocalProviderNote,
			Hashes:      &[]cdx.Hash{{Algorithm: cdx.HashAlgoSHA256, Value: digest.Hex}},
		},
	}
	bom.Components = &components
	bom.Dependencies = &[]cdx.Dependency{
		{Ref: imageRef, Dependencies: &[]string{binRef, "file:" + CACertsPath}},
		{Ref: binRef, Dependencies: &binDeps},
	}
	return bom, nil
}

// WriteSBOM encodes bom as pretty CycloneDX JSON.
func WriteSBOM(w io.Writer, bom *cdx.BOM) error {
	if err := cdx.NewBOMEncoder(w, cdx.BOMFileFormatJSON).SetPretty(true).Encode(bom); err != nil {
		return fmt.Errorf("encode SBOM: %w", err)
	}
	return nil
}

func purl(path, version string) string {
	return "pkg:golang/" + path + "@" + version
}

// serial is an RFC 4122 version 5-style URN from the digest, stable across builds.
func serial(digest v1.Hash) string {
	h := sha256.Sum256([]byte(digest.String()))
	h[6] = (h[6] & 0x0f) | 0x50
	h[8] = (h[8] & 0x3f) | 0x80
	b := hex.EncodeToString(h[:16])
	return fmt.Sprintf("urn:uuid:%s-%s-%s-%s-%s", b[0:8], b[8:12], b[12:16], b[16:20], b[20:32])
}

func buildSettings(info *buildinfo.BuildInfo) *[]cdx.Property {
	props := []cdx.Property{}
	for _, s := range info.Settings {
		props = append(props, cdx.Property{Name: "golang:build:" + s.Key, Value: s.Value})
	}
	return &props
}
