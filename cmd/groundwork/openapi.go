package main

import (
	"github.com/spf13/cobra"

	"github.com/groundworkhq/groundwork/internal/api"
)

func newOpenAPI() *cobra.Command {
	return &cobra.Command{
		Use:   "openapi",
		Short: "Print the OpenAPI 3.1 document of the /api routes (also served at /api/openapi.json)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			doc, err := api.OpenAPIDocument()
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(append(doc, '\n'))
			return err
		},
	}
}
