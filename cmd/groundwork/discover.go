package main

import (
	"fmt"
	"net/url"
	"os"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/groundworkhq/groundwork/internal/discovery"
)

func newDiscover(g *globals) *cobra.Command {
	var space string
	var refresh bool
	cmd := &cobra.Command{
		Use:       "discover KIND --space SPACE_ID",
		Short:     "List what a space's account and region have: " + strings.Join(discovery.Kinds, ", "),
		Long:      "List what a space's account and region already have, every page: " + strings.Join(discovery.Kinds, ", ") + ".\nMANAGED says whether Groundwork created it. Answers are cached briefly; --refresh asks the cloud again.",
		Args:      cobra.ExactArgs(1),
		ValidArgs: discovery.Kinds,
		RunE: func(cmd *cobra.Command, args []string) error {
			if space == "" {
				return fmt.Errorf("--space is required (or set GROUNDWORK_SPACE)")
			}
			all := discovery.Page{Items: []discovery.Item{}}
			cursor := ""
			for {
				q := url.Values{}
				if refresh && cursor == "" {
					q.Set("refresh", "true")
				}
				if cursor != "" {
					q.Set("cursor", cursor)
				}
				var page discovery.Page
				path := "/api/spaces/" + url.PathEscape(space) + "/discovery/" + url.PathEscape(args[0])
				if enc := q.Encode(); enc != "" {
					path += "?" + enc
				}
				if err := g.client().Do(ctxOf(cmd), "GET", path, nil, &page); err != nil {
					return err
				}
				all.Items = append(all.Items, page.Items...)
				if cursor = page.NextCursor; cursor == "" {
					break
				}
			}
			return g.printOut(cmd.OutOrStdout(), all, []string{"ID", "NAME", "CIDR", "AZ", "VERSION", "MANAGED", "TAGS"}, func(add func(...any)) {
				for _, it := range all.Items {
					var tags []string
					for k, v := range it.Tags {
						tags = append(tags, k+"="+v)
					}
					sort.Strings(tags)
					add(it.ID, it.Name, dash(it.CIDR), dash(it.AZ), dash(it.Version), it.Managed, dash(strings.Join(tags, ",")))
				}
			})
		},
	}
	cmd.Flags().StringVar(&space, "space", os.Getenv("GROUNDWORK_SPACE"), "space ID (GROUNDWORK_SPACE)")
	cmd.Flags().BoolVar(&refresh, "refresh", false, "ask the cloud again instead of the short-lived cache")
	return cmd
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
