package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/groundworkhq/groundwork/internal/pricing"
)

func newPricing() *cobra.Command {
	cmd := &cobra.Command{Use: "pricing", Short: "The price book plans are estimated with"}
	var awsFiles, azureFiles, gcpFiles []string
	var from, out, date string
	refresh := &cobra.Command{
		Use:   "refresh [--aws offer.json]... [--azure prices.json]... [--gcp skus.json]... [-w book.json]",
		Short: "Rebuild the price book from the clouds' public price lists, saved as files",
		Long: "Rebuild the price book from the clouds' public price lists: AWS Price List bulk offer files\n" +
			"(AmazonEC2, AmazonRDS, AmazonEKS), pages of the Azure Retail Prices API, pages of the Cloud\n" +
			"Billing Catalog's SKUs. Prices they hold replace the book's; the rest of the book is kept.\n" +
			"Reads files so that it runs where the price lists were fetched, or from a copy.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			book, err := pricing.Embedded()
			if from != "" {
				raw, rerr := os.ReadFile(from)
				if rerr != nil {
					return rerr
				}
				book, err = pricing.Parse(raw)
			}
			if err != nil {
				return err
			}
			var entries []pricing.Entry
			for _, src := range []struct {
				files []string
				parse func(io.Reader) ([]pricing.Entry, error)
			}{{awsFiles, pricing.ParseAWS}, {azureFiles, pricing.ParseAzure}, {gcpFiles, pricing.ParseGCP}} {
				for _, path := range src.files {
					f, err := os.Open(path)
					if err != nil {
						return err
					}
					es, err := src.parse(f)
					f.Close()
					if err != nil {
						return fmt.Errorf("%s: %w", path, err)
					}
					entries = append(entries, es...)
				}
			}
			if len(entries) == 0 {
				return fmt.Errorf("no prices read: give --aws, --azure or --gcp files")
			}
			if date == "" {
				date = time.Now().UTC().Format(time.DateOnly)
			}
			raw, err := book.Merge(entries, date).JSON()
			if err != nil {
				return err
			}
			if out == "" || out == "-" {
				_, err = cmd.OutOrStdout().Write(raw)
				return err
			}
			if err := os.WriteFile(out, raw, 0o644); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "%d prices read; book %s written to %s\n", len(entries), date, out)
			return nil
		},
	}
	refresh.Flags().StringArrayVar(&awsFiles, "aws", nil, "AWS Price List bulk offer file (repeatable)")
	refresh.Flags().StringArrayVar(&azureFiles, "azure", nil, "Azure Retail Prices API answer (repeatable)")
	refresh.Flags().StringArrayVar(&gcpFiles, "gcp", nil, "Cloud Billing Catalog SKUs answer (repeatable)")
	refresh.Flags().StringVar(&from, "from", "", "book to update (default: the built-in one)")
	refresh.Flags().StringVarP(&out, "write", "w", "", "file to write the book to (default: standard output)")
	refresh.Flags().StringVar(&date, "date", "", "the new book's date (default: today, UTC)")
	cmd.AddCommand(refresh)
	return cmd
}
