package gcp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"golang.org/x/oauth2"
	"google.golang.org/api/googleapi"
	iamcredentials "google.golang.org/api/iamcredentials/v1"
	"google.golang.org/api/option"

	"github.com/groundworkhq/groundwork/internal/fault"
)

// impersonate turns the base token source into the target service account's: each token is
// minted by the IAM Credentials API (generateAccessToken), called with the base credential
// over base (the account's transport, so an endpoint override and the outbound policy hold
// for it as for every other call). The package google.golang.org/api/impersonate does the
// same but always calls Google's own endpoint, which a test target or a private endpoint
// cannot replace.
func (c *Client) impersonate(ctx context.Context, baseTokens oauth2.TokenSource, base http.RoundTripper) (oauth2.TokenSource, error) {
	hc := &http.Client{Transport: base, Timeout: time.Minute}
	if baseTokens != nil {
		hc.Transport = &oauth2.Transport{Source: baseTokens, Base: base}
	}
	opts := []option.ClientOption{option.WithHTTPClient(hc)}
	if ep := c.Endpoints[ServiceIAMCredentials]; ep != "" {
		opts = append(opts, option.WithEndpoint(strings.TrimSuffix(ep, "/")+"/"))
	}
	svc, err := iamcredentials.NewService(context.WithoutCancel(ctx), opts...)
	if err != nil {
		return nil, fault.System(err)
	}
	return oauth2.ReuseTokenSource(nil, impersonated{svc: svc, target: c.TargetServiceAccount}), nil
}

// impersonated mints the target service account's access tokens.
type impersonated struct {
	svc    *iamcredentials.Service
	target string
}

// Token implements oauth2.TokenSource.
func (i impersonated) Token() (*oauth2.Token, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := i.svc.Projects.ServiceAccounts.GenerateAccessToken("projects/-/serviceAccounts/"+i.target,
		&iamcredentials.GenerateAccessTokenRequest{Scope: []string{Scope}, Lifetime: "3600s"}).Context(ctx).Do()
	var ge *googleapi.Error
	if errors.As(err, &ge) && (ge.Code == http.StatusForbidden || ge.Code == http.StatusNotFound) {
		return nil, fault.UserAction(fmt.Errorf("act as %s: %w", i.target, err), "ImpersonationDenied",
			"The account's base credential may not act as "+i.target+": grant it Service Account Token Creator (roles/iam.serviceAccountTokenCreator) on that service account, and check that it exists.",
			"https://console.cloud.google.com/iam-admin/serviceaccounts")
	}
	if err != nil {
		return nil, fmt.Errorf("act as %s: %w", i.target, err)
	}
	expiry, err := time.Parse(time.RFC3339, resp.ExpireTime)
	if err != nil {
		return nil, fmt.Errorf("act as %s: expiry %q: %w", i.target, resp.ExpireTime, err)
	}
	return &oauth2.Token{AccessToken: resp.AccessToken, TokenType: "Bearer", Expiry: expiry}, nil
}
