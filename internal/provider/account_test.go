package provider

import (
	"context"
	"errors"
	"testing"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/secrets"
	"github.com/groundworkhq/groundwork/internal/store"
)

type accountRecords struct {
	space   *store.Space
	account *store.CloudAccount
	err     error
}

func (r accountRecords) GetSpace(context.Context, string, string) (*store.Space, error) {
	if r.space == nil {
		return nil, r.err
	}
	return r.space, nil
}

func (r accountRecords) GetCloudAccount(context.Context, string, string) (*store.CloudAccount, error) {
	if r.account == nil {
		return nil, store.ErrNotFound
	}
	return r.account, nil
}

type oneSecret map[string]string

func (v oneSecret) For(secrets.Owner) secrets.SecretStore { return v }
func (v oneSecret) Put(context.Context, string, string) (string, error) {
	return "", errors.New("read only")
}
func (v oneSecret) Delete(context.Context, string) error { return nil }
func (v oneSecret) Get(_ context.Context, ref string) (string, error) {
	if s, ok := v[ref]; ok {
		return s, nil
	}
	return "", secrets.ErrNotFound
}

// Every module opens a space's account through one function, so the faults of a missing
// space, account or credential are the same whatever the cloud.
func TestOpenSpaceAccount(t *testing.T) {
	t.Parallel()
	sp := &store.Space{ID: "spc_1", OrgID: "org_1", CloudAccountID: "acc_1"}
	acc := &store.CloudAccount{ID: "acc_1", OrgID: "org_1", CredentialsRef: "local:sec_1"}
	vault := oneSecret{"local:sec_1": `{"k":"v"}`}
	cases := map[string]struct {
		r     accountRecords
		v     CredentialVault
		class job.FailureClass
		code  string
	}{
		"opened":             {r: accountRecords{space: sp, account: acc}, v: vault},
		"space gone":         {r: accountRecords{err: store.ErrNotFound}, v: vault, class: job.ClassUserAction, code: "NotFound"},
		"store down":         {r: accountRecords{err: errors.New("connection refused")}, v: vault, class: job.ClassTransient},
		"no account named":   {r: accountRecords{space: &store.Space{ID: "spc_1"}}, v: vault, class: job.ClassUserAction, code: "NoCloudAccount"},
		"account gone":       {r: accountRecords{space: sp}, v: vault, class: job.ClassUserAction, code: "NotFound"},
		"credentials gone":   {r: accountRecords{space: sp, account: acc}, v: oneSecret{}, class: job.ClassUserAction, code: "CredentialsMissing"},
		"no store for a ref": {r: accountRecords{space: sp, account: acc}, class: job.ClassSystem},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := OpenSpaceAccount(context.Background(), tc.r, tc.v, "org_1", "spc_1", "an Example cloud account")
			if tc.class == "" {
				if err != nil || got.Credentials != `{"k":"v"}` || got.Account.ID != "acc_1" {
					t.Fatalf("%+v, %v", got, err)
				}
				return
			}
			if fe := fault.As(err); fe.Class != tc.class || fe.Code != tc.code {
				t.Fatalf("%v: class %s code %q; want %s %q", err, fe.Class, fe.Code, tc.class, tc.code)
			}
		})
	}
}
