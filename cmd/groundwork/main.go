// Command groundwork is the Groundwork server (serve, migrate) and its CLI client.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/groundworkhq/groundwork/internal/client"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := execute(ctx, newRoot()); err != nil {
		var apiErr *client.Error
		if errors.As(err, &apiErr) {
			fmt.Fprintln(os.Stderr, "error:", apiErr.Error())
		} else if !errors.Is(err, errSilent) {
			fmt.Fprintln(os.Stderr, "error:", err)
		}
		os.Exit(1)
	}
}

// errSilent exits non-zero after the command has already said why.
var errSilent = errors.New("")

// execute runs the command line, and names a refusal's fields by the flags of the command.
func execute(ctx context.Context, root *cobra.Command) error {
	cmd, err := root.ExecuteContextC(ctx)
	var apiErr *client.Error
	if errors.As(err, &apiErr) {
		nameFlags(cmd, apiErr)
		apiErr.Detail, apiErr.FixHint = cliWords.Replace(apiErr.Detail), cliWords.Replace(apiErr.FixHint)
		for i := range apiErr.Errors {
			apiErr.Errors[i].Message = cliWords.Replace(apiErr.Errors[i].Message)
		}
	}
	return err
}

// cliWords points the server's messages, written for any API client, at the CLI command that
// does what the HTTP route they name does.
var cliWords = strings.NewReplacer(
	"GET /api/catalog/components", "groundwork components list",
	"POST /api/spaces/register-cluster", "groundwork spaces register-cluster",
	"GET /api/policies", "groundwork roles policies",
	"POST /api/users", "groundwork users create",
	"GET /api/catalog/types", "groundwork catalog types",
)

// nameFlags renames the fields of an API refusal to the flags the user typed for them
// ("authMethod" is --auth-method, "cloudAccountID" is --cloud-account), where the command has
// such a flag; other fields (a spec's config.name) keep their names.
func nameFlags(cmd *cobra.Command, e *client.Error) {
	if cmd == nil {
		return
	}
	for i, f := range e.Errors {
		k := kebab(f.Field)
		for _, name := range []string{k, strings.TrimSuffix(k, "-id")} {
			if cmd.Flags().Lookup(name) != nil {
				e.Errors[i].Field = "--" + name
				break
			}
		}
	}
}

// kebab spells a JSON field name as a flag: resourceID is resource-id.
func kebab(field string) string {
	var b strings.Builder
	rs := []rune(field)
	for i, r := range rs {
		if unicode.IsUpper(r) {
			// An upper-case letter starts a word unless it continues an acronym ("ID").
			if i > 0 && (!unicode.IsUpper(rs[i-1]) || i+1 < len(rs) && unicode.IsLower(rs[i+1])) {
				b.WriteByte('-')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}
