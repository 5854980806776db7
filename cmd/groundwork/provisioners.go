package main

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/spf13/cobra"

	"github.com/groundworkhq/groundwork/internal/catalog"
	"github.com/groundworkhq/groundwork/internal/client"
	"github.com/groundworkhq/groundwork/internal/protocol"
)

func newProvisioners(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "provisioners", Short: "Manage the provisioners that hold (category, type) pairs"}
	var (
		in     protocol.RegisterInput
		pairs  []string
		server string
	)
	register := &cobra.Command{
		Use:   "register",
		Short: "Register a remote provisioner for one or more pairs",
		Long: "Register a remote provisioner for one or more pairs. Here --url is the provisioner's URL;\n" +
			"name the Groundwork server with --server or GROUNDWORK_URL.",
		Example: "  groundwork provisioners register --name buckets --url http://10.0.0.5:8081 \\\n" +
			"    --pair managed-resource/bucket",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			in.Pairs = nil
			for _, s := range pairs {
				p, err := catalog.ParsePair(strings.TrimSpace(s))
				if err != nil {
					return fmt.Errorf("--pair: %w", err)
				}
				in.Pairs = append(in.Pairs, p)
			}
			c := g.client()
			if server != "" {
				c = client.New(server, g.token)
			}
			var p protocol.Provisioner
			if err := c.Do(ctxOf(cmd), "POST", "/api/provisioners", in, &p); err != nil {
				return err
			}
			return g.printOut(cmd.OutOrStdout(), p, provisionerHeader, func(add func(...any)) { addProvisioner(add, p) })
		},
	}
	register.Flags().StringVar(&in.Name, "name", "", "provisioner name")
	// --url is the provisioner's here, as the docs spell the command; it shadows the global
	// --url, so the server gets a flag of its own.
	register.Flags().StringVar(&in.URL, "url", "", "base URL the provisioner serves the protocol at")
	register.Flags().StringVar(&server, "server", "", "Groundwork server URL (default GROUNDWORK_URL or http://localhost:5087)")
	register.Flags().StringSliceVar(&pairs, "pair", nil, "a pair it holds, as category/type (repeat for more)")
	for _, f := range []string{"name", "url", "pair"} {
		_ = register.MarkFlagRequired(f)
	}
	list := &cobra.Command{
		Use: "list", Short: "List provisioners, the built-in one first", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var out struct {
				Data []protocol.Provisioner `json:"data"`
			}
			if err := g.client().Do(ctxOf(cmd), "GET", "/api/provisioners", nil, &out); err != nil {
				return err
			}
			return g.printOut(cmd.OutOrStdout(), out, provisionerHeader, func(add func(...any)) {
				for _, p := range out.Data {
					addProvisioner(add, p)
				}
			})
		},
	}
	get := &cobra.Command{
		Use: "get PROVISIONER_ID", Short: "Show a provisioner", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var p protocol.Provisioner
			if err := g.client().Do(ctxOf(cmd), "GET", "/api/provisioners/"+args[0], nil, &p); err != nil {
				return err
			}
			return g.printOut(cmd.OutOrStdout(), p, nil, nil)
		},
	}
	var force bool
	remove := &cobra.Command{
		Use: "remove PROVISIONER_ID", Aliases: []string{"rm", "delete"}, Short: "Remove a registration; its pairs become free",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := "/api/provisioners/" + url.PathEscape(args[0])
			if force {
				path += "?force=true"
			}
			if err := g.client().Do(ctxOf(cmd), "DELETE", path, nil, nil); err != nil {
				return err
			}
			return g.done(cmd, "removed", args[0])
		},
	}
	remove.Flags().BoolVar(&force, "force", false, "remove even while jobs it created are live (their teardown will fail)")
	cmd.AddCommand(register, list, get, remove)
	return cmd
}

var provisionerHeader = []string{"ID", "NAME", "URL", "PAIRS"}

func addProvisioner(add func(...any), p protocol.Provisioner) {
	pairs := make([]string, len(p.Pairs))
	for i, pair := range p.Pairs {
		pairs[i] = pair.String()
	}
	url := p.URL
	if p.BuiltIn {
		url = "(built-in)"
	}
	add(p.ID, p.Name, url, strings.Join(pairs, ","))
}
