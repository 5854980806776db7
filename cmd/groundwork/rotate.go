package main

import (
	"bufio"
	"errors"
	"strings"

	"github.com/spf13/cobra"

	"github.com/groundworkhq/groundwork/internal/job"
)

// newCredentials is the credentials group: rotation of a datastore job's credentials.
func newCredentials(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "credentials", Short: "Credentials of a datastore job: rotate the admin's or a connection's"}
	var target, connection string
	var passwordStdin bool
	rotate := &cobra.Command{
		Use:   "rotate JOB_ID (--target admin | --connection NAME_OR_ID) [--admin-password-stdin]",
		Short: "Rotate a credential: a new secret version, the server's password changed, every connection moved, the old version deleted",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := map[string]string{}
			if target != "" {
				req["target"] = target
			}
			if connection != "" {
				req["connection"] = connection
			}
			if passwordStdin {
				// Read from stdin so that the password is in no shell history or process list.
				line, err := bufio.NewReader(cmd.InOrStdin()).ReadString('\n')
				if line = strings.TrimRight(line, "\r\n"); line == "" {
					return errors.Join(errors.New("--admin-password-stdin: no password on stdin"), err)
				}
				req["adminPassword"] = line
			}
			var j job.Job
			if err := g.client().Do(ctxOf(cmd), "POST", jobPath(args[0])+"/rotate-credentials", req, &j); err != nil {
				return err
			}
			return g.printOrWatch(cmd, &j)
		},
	}
	fl := rotate.Flags()
	fl.StringVar(&target, "target", "", "admin: the server's admin credential")
	fl.StringVar(&connection, "connection", "", "the credential this connection holds (the admin's, or its database owner's)")
	fl.BoolVar(&passwordStdin, "admin-password-stdin", false, "an adopted datastore: read the admin password the server now takes from stdin")
	fl.Bool("watch", false, "follow the job until the rotation settles")
	cmd.AddCommand(rotate)
	return cmd
}
