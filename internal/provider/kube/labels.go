package kube

import (
	"bytes"
	"fmt"

	"sigs.k8s.io/kustomize/kyaml/kio"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
)

// labelRenderer is a Helm post-renderer that puts Groundwork's labels on every object a chart
// renders, so that objects can be traced to their job (and found by label) whatever the chart's
// own templates do. It touches metadata.labels only: selectors are the chart's business and
// are immutable on Deployments.
type labelRenderer struct {
	labels map[string]string
}

func (p *labelRenderer) Run(in *bytes.Buffer) (*bytes.Buffer, error) {
	nodes, err := kio.ParseAll(in.String())
	if err != nil {
		return nil, fmt.Errorf("parse rendered manifests: %w", err)
	}
	for _, n := range nodes {
		for k, v := range p.labels {
			if err := n.PipeE(kyaml.SetLabel(k, v)); err != nil {
				return nil, fmt.Errorf("label %s: %w", n.GetName(), err)
			}
		}
	}
	out, err := kio.StringAll(nodes)
	if err != nil {
		return nil, fmt.Errorf("print manifests: %w", err)
	}
	return bytes.NewBufferString(out), nil
}
