package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/groundworkhq/groundwork/internal/app"
	"github.com/groundworkhq/groundwork/internal/catalog/components"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/store"
)

// addComponentFlags adds serve's flags for the component family.
func addComponentFlags(cmd *cobra.Command, o *app.ComponentOptions) {
	cmd.Flags().StringVar(&o.ChartDir, "chart-dir", os.Getenv("GROUNDWORK_CHART_DIR"),
		"folder of local charts (<id>/, <chart>/, <chart>-<version>.tgz) used before the catalog's repositories (GROUNDWORK_CHART_DIR)")
	cmd.Flags().StringVar(&o.CatalogFile, "component-catalog", os.Getenv("GROUNDWORK_COMPONENT_CATALOG"),
		"component catalog file replacing the built-in configs/components.yaml (GROUNDWORK_COMPONENT_CATALOG)")
	cmd.Flags().StringVar(&o.ChartCAFile, "chart-ca-file", os.Getenv("GROUNDWORK_CHART_CA_FILE"),
		"PEM bundle that chart repositories and OCI registries are verified against, instead of the system roots (GROUNDWORK_CHART_CA_FILE)")
}

// newRegisterCluster is `groundwork spaces register-cluster`.
func newRegisterCluster(g *globals) *cobra.Command {
	var req struct {
		Name           string `json:"name"`
		Provider       string `json:"provider,omitempty"`
		Region         string `json:"region,omitempty"`
		CloudAccountID string `json:"cloudAccountID,omitempty"`
		ClusterName    string `json:"clusterName,omitempty"`
		Cluster        struct {
			Kubeconfig string `json:"kubeconfig,omitempty"`
			Endpoint   string `json:"endpoint,omitempty"`
			CAData     string `json:"caData,omitempty"`
			Token      string `json:"token,omitempty"`
		} `json:"cluster"`
	}
	var kubeconfig, caFile, tokenFile string
	cmd := &cobra.Command{
		Use:   "register-cluster",
		Short: "Register an existing Kubernetes cluster as a space (the credential goes to the secret store)",
		Long: "Register an existing Kubernetes cluster as a space. Give either --kubeconfig, or --endpoint with\n" +
			"--ca-file and --token-file. The server checks that the cluster answers before it keeps anything.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case kubeconfig != "" && (req.Cluster.Endpoint != "" || tokenFile != ""):
				return fmt.Errorf("give either --kubeconfig or --endpoint and --token-file, not both")
			case kubeconfig != "":
				b, err := os.ReadFile(kubeconfig)
				if err != nil {
					return fmt.Errorf("--kubeconfig: %w", err)
				}
				req.Cluster.Kubeconfig = string(b)
			case req.Cluster.Endpoint == "" || tokenFile == "":
				return fmt.Errorf("give --kubeconfig, or --endpoint with --token-file (and --ca-file unless the certificate is publicly trusted)")
			default:
				tok, err := os.ReadFile(tokenFile)
				if err != nil {
					return fmt.Errorf("--token-file: %w", err)
				}
				req.Cluster.Token = strings.TrimSpace(string(tok))
				if caFile != "" {
					ca, err := os.ReadFile(caFile)
					if err != nil {
						return fmt.Errorf("--ca-file: %w", err)
					}
					req.Cluster.CAData = string(ca)
				}
			}
			var sp store.Space
			if err := g.client().Do(ctxOf(cmd), "POST", "/api/spaces/register-cluster", req, &sp); err != nil {
				return err
			}
			return g.printOut(cmd.OutOrStdout(), sp, []string{"ID", "NAME", "PROVIDER", "REGION", "STATUS"}, func(add func(...any)) {
				add(sp.ID, sp.Name, sp.Provider, sp.Region, sp.Status)
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&req.Name, "name", "", "space name")
	f.StringVar(&req.Provider, "provider", "local", "aws, gcp, azure or local")
	f.StringVar(&req.Region, "region", "", "region (default local for the local provider)")
	f.StringVar(&req.CloudAccountID, "cloud-account", "", "cloud account the cluster runs in (optional)")
	f.StringVar(&req.ClusterName, "cluster-name", "", "the cluster's name at its provider (optional)")
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (its current context; static token or client certificate, embedded)")
	f.StringVar(&req.Cluster.Endpoint, "endpoint", "", "API server URL")
	f.StringVar(&caFile, "ca-file", "", "PEM file of the API server's CA")
	f.StringVar(&tokenFile, "token-file", "", "file holding a bearer token")
	return cmd
}

type componentSummary struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Category    string `json:"category"`
	Version     string `json:"version"`
	Description string `json:"description"`
}

// newComponents is `groundwork components list|install|uninstall`.
func newComponents(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "components", Short: "Install Helm components of the catalog into cluster spaces"}
	list := &cobra.Command{
		Use: "list", Short: "List the component catalog", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var out struct {
				Data []componentSummary `json:"data"`
			}
			if err := g.client().Do(ctxOf(cmd), "GET", "/api/catalog/components", nil, &out); err != nil {
				return err
			}
			return g.printOut(cmd.OutOrStdout(), out, []string{"ID", "CATEGORY", "VERSION", "DESCRIPTION"}, func(add func(...any)) {
				for _, c := range out.Data {
					add(c.ID, c.Category, c.Version, c.Description)
				}
			})
		},
	}
	var req struct {
		SpaceID     string         `json:"spaceID"`
		ComponentID string         `json:"componentID"`
		Values      map[string]any `json:"values,omitempty"`
		Namespace   string         `json:"namespace,omitempty"`
	}
	var sets []string
	var valuesFile string
	install := &cobra.Command{
		Use:   "install COMPONENT_ID --space SPACE_ID",
		Short: "Install a component into a space, or upgrade it there (a new job; the release is the space's)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req.ComponentID = args[0]
			vals, err := installValues(valuesFile, sets)
			if err != nil {
				return err
			}
			req.Values = vals
			var j job.Job
			if err := g.client().Do(ctxOf(cmd), "POST", "/api/provisioning-jobs/install-component", req, &j); err != nil {
				return err
			}
			return g.printOut(cmd.OutOrStdout(), j, []string{"JOB", "SPACE", "KIND", "STATUS"}, func(add func(...any)) {
				add(j.ID, j.SpaceID, j.Family, j.Status)
			})
		},
	}
	install.Flags().StringVar(&req.SpaceID, "space", "", "space ID of a registered cluster")
	install.Flags().StringVar(&req.Namespace, "namespace", "", "namespace of the release (default: the catalog's)")
	install.Flags().StringArrayVar(&sets, "set", nil, "a value, key=value (dotted keys such as controller.service.type; the value is read as YAML)")
	install.Flags().StringVarP(&valuesFile, "values", "f", "", "YAML file of values (--set wins over it)")
	_ = install.MarkFlagRequired("space")
	uninstall := &cobra.Command{
		Use:   "uninstall JOB_ID",
		Short: "Uninstall the release an install job made (deletes the job; the teardown runs as a job phase)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var j job.Job
			if err := g.client().Do(ctxOf(cmd), "DELETE", "/api/provisioning-jobs/"+args[0], nil, &j); err != nil {
				return err
			}
			return g.printOut(cmd.OutOrStdout(), j, []string{"JOB", "STATUS", "PHASE"}, func(add func(...any)) {
				add(j.ID, j.Status, j.Phase)
			})
		},
	}
	cmd.AddCommand(list, install, uninstall)
	return cmd
}

// installValues reads the values file and lays the --set values (dotted keys) over it; the
// server checks the result against the component's schema.
func installValues(file string, sets []string) (map[string]any, error) {
	vals := map[string]any{}
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("--values: %w", err)
		}
		if err := yaml.Unmarshal(b, &vals); err != nil {
			return nil, fmt.Errorf("--values %s: %w", file, err)
		}
	}
	set := map[string]any{}
	for _, s := range sets {
		k, raw, ok := strings.Cut(s, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--set %q: want key=value", s)
		}
		var v any
		if err := yaml.Unmarshal([]byte(raw), &v); err != nil {
			return nil, fmt.Errorf("--set %s: %w", k, err)
		}
		if v == nil && raw != "null" && raw != "~" {
			v = raw // an empty value is an empty string, not null
		}
		set[k] = v
	}
	nested, err := components.ExpandDotted(set)
	if err != nil {
		return nil, fmt.Errorf("--set: %w", err)
	}
	vals = components.Merge(vals, nested)
	if len(vals) == 0 {
		return nil, nil
	}
	return vals, nil
}
