package aws

import (
	"context"
	"testing"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
)

func TestAccountValidate(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		a     Account
		valid bool
	}{
		"default chain":            {a: Account{Region: "eu-west-1"}, valid: true},
		"static keys":              {a: Account{AuthMethod: AuthStaticKeys, Region: "eu-west-1", AccessKeyID: "AK", SecretAccessKey: "SK"}, valid: true},
		"assume role":              {a: Account{AuthMethod: AuthAssumeRole, Region: "eu-west-1", RoleARN: "arn:aws:iam::1:role/x"}, valid: true},
		"no region":                {a: Account{}},
		"static keys without keys": {a: Account{AuthMethod: AuthStaticKeys, Region: "eu-west-1"}},
		"assume role without role": {a: Account{AuthMethod: AuthAssumeRole, Region: "eu-west-1"}},
		"unknown method":           {a: Account{AuthMethod: "oauth", Region: "eu-west-1"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			err := tc.a.Validate()
			if (err == nil) != tc.valid {
				t.Fatalf("Validate = %v, want valid=%v", err, tc.valid)
			}
			if _, err := LoadConfig(context.Background(), tc.a); !tc.valid && fault.ClassOf(err) != job.ClassUserAction {
				t.Fatalf("LoadConfig of an invalid account = %v, want user_action", err)
			}
		})
	}
}

func TestLoadConfigEndpointAndRetryer(t *testing.T) {
	t.Parallel()
	cfg, err := LoadConfig(context.Background(), Account{AuthMethod: AuthStaticKeys, Region: "us-east-1",
		AccessKeyID: "AK", SecretAccessKey: "SK", Endpoint: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.BaseEndpoint == nil || *cfg.BaseEndpoint != "http://127.0.0.1:1" {
		t.Fatalf("base endpoint = %v", cfg.BaseEndpoint)
	}
	if got := cfg.Retryer().MaxAttempts(); got != DefaultMaxAttempts {
		t.Fatalf("max attempts = %d, want %d", got, DefaultMaxAttempts)
	}
	creds, err := cfg.Credentials.Retrieve(context.Background())
	if err != nil || creds.AccessKeyID != "AK" {
		t.Fatalf("credentials = %+v, %v", creds, err)
	}
}
