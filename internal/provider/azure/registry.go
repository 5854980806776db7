package azure

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerregistry/armcontainerregistry"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline/registry"
)

// roleRegistry is the tag role of a job's container registry.
const roleRegistry = "registry"

// RegistryDriver makes a job's Azure Container Registry: one Standard registry per job, the
// admin user off (clients sign in with their Entra identity). ACR makes a repository on the
// first push into it, so the job's repository is recorded as its address in the registry.
type RegistryDriver struct{ C *Client }

var _ registry.Driver = RegistryDriver{}

// RegistryDriver implements provider.RegistryDrivers.
func (m *Module) RegistryDriver(ctx context.Context, j *job.Job) (registry.Driver, error) {
	c, err := m.Client(ctx, j)
	if err != nil {
		return nil, err
	}
	return RegistryDriver{C: c}, nil
}

// RegistryName is the registry of j: ACR names are 5-50 letters and digits and unique across
// Azure (they are DNS names under azurecr.io), so the name is the job's key, not the user's.
func RegistryName(j *job.Job) string {
	n := "gw" + jobKey(j)
	if len(n) < 5 {
		n += strings.Repeat("0", 5-len(n))
	}
	return n
}

func (d RegistryDriver) client() (*armcontainerregistry.RegistriesClient, error) {
	r, err := armcontainerregistry.NewRegistriesClient(d.C.SubscriptionID, d.C.cred, d.C.opts)
	if err != nil {
		return nil, fault.System(err)
	}
	return r, nil
}

// EnsureRepository implements registry.Driver: it makes (or finds) the job's registry and
// returns the repository's address in it.
func (d RegistryDriver) EnsureRepository(ctx context.Context, j *job.Job, cfg registry.Config) (registry.Repository, error) {
	// ACR offers neither per repository: scanning is Microsoft Defender for Containers,
	// enabled on the subscription, and tag locks are set per image after a push. A request
	// that relies on them is refused rather than served without them.
	if cfg.ImmutableTags {
		return registry.Repository{}, fault.UserAction(errors.New("immutableTags: Azure Container Registry has no registry-wide tag immutability"), "ImmutableTagsUnsupported",
			"Remove immutableTags; lock pushed images with az acr repository update --write-enabled false instead.", "")
	}
	if cfg.ScanOnPush {
		return registry.Repository{}, fault.UserAction(errors.New("scanOnPush: Azure Container Registry scans through Microsoft Defender for Containers, not per registry"), "ScanOnPushUnsupported",
			"Remove scanOnPush and enable Microsoft Defender for Containers on the subscription to scan pushed images.", d.C.PortalURL("")+"/security")
	}
	if err := d.C.EnsureGroup(ctx, j.SpaceID); err != nil {
		return registry.Repository{}, err
	}
	regs, err := d.client()
	if err != nil {
		return registry.Repository{}, err
	}
	rg, rname := d.C.ResourceGroup, RegistryName(j)
	var got armcontainerregistry.Registry
	get := func(ctx context.Context) (State, error) {
		v, err := regs.Get(ctx, rg, rname, nil)
		got = v.Registry
		return stateOf(err, v.Tags, v.Properties, j)
	}
	ops := Ops{}
	err = d.C.await(ctx, "registry "+rname, func() (bool, error) {
		return converge(ctx, d.C, ops, "create registry", get, nil, func(ctx context.Context, tok string) (*runtime.Poller[armcontainerregistry.RegistriesClientCreateResponse], error) {
			return regs.BeginCreate(ctx, rg, rname, armcontainerregistry.Registry{
				Location: to.Ptr(d.C.Location), Tags: tags(j, roleRegistry),
				SKU:        &armcontainerregistry.SKU{Name: to.Ptr(armcontainerregistry.SKUNameStandard)},
				Properties: &armcontainerregistry.RegistryProperties{AdminUserEnabled: to.Ptr(false)},
			}, &armcontainerregistry.RegistriesClientBeginCreateOptions{ResumeToken: tok})
		})
	})
	if err != nil {
		return registry.Repository{}, d.nameTaken(rname, err)
	}
	// The operation's result may be the last poll's; the registry as Azure keeps it has the
	// login server.
	if _, err := get(ctx); err != nil {
		return registry.Repository{}, d.C.Classify(err)
	}
	if got.ID == nil || got.Properties == nil || got.Properties.LoginServer == nil {
		return registry.Repository{}, fault.Transientf("registry %s has no login server yet", rname)
	}
	server := *got.Properties.LoginServer
	return registry.Repository{Name: cfg.Name, ID: *got.ID, URI: server + "/" + cfg.Name}, nil
}

// nameTaken gives Azure's answer to a registry name held elsewhere (another resource group or
// subscription) its fix; other errors pass as they are.
func (d RegistryDriver) nameTaken(rname string, err error) error {
	var re *azcore.ResponseError
	if errors.As(err, &re) && re.ErrorCode == "AlreadyInUse" {
		// Azure's answer is what the user needs, not the generic class converge gave it.
		return fault.UserAction(fmt.Errorf("registry name %s: %w", rname, re), "RegistryNameTaken",
			fmt.Sprintf("The registry name %s.azurecr.io is held by a registry outside the space's resource group %s (a name is unique across Azure); delete that registry, or create the job again to get a new name.", rname, d.C.ResourceGroup),
			d.C.PortalURL("")+"/resources")
	}
	return err
}

// DeleteRepository implements registry.Driver: it deletes the job's registry with every
// repository in it. A registry that is gone, or one of that name that is not the job's, is
// nothing of the job's to delete.
func (d RegistryDriver) DeleteRepository(ctx context.Context, j *job.Job, _ string) error {
	regs, err := d.client()
	if err != nil {
		return err
	}
	rg, rname := d.C.ResourceGroup, RegistryName(j)
	ops := Ops{}
	return d.C.await(ctx, "deleting registry "+rname, func() (bool, error) {
		return remove(ctx, d.C, ops, "delete registry", func(ctx context.Context) (State, error) {
			v, err := regs.Get(ctx, rg, rname, nil)
			if err == nil && !owns(j, v.Tags) {
				return State{}, nil
			}
			return stateOf(err, v.Tags, v.Properties, j)
		}, func(ctx context.Context, tok string) (*runtime.Poller[armcontainerregistry.RegistriesClientDeleteResponse], error) {
			return regs.BeginDelete(ctx, rg, rname, &armcontainerregistry.RegistriesClientBeginDeleteOptions{ResumeToken: tok})
		})
	})
}
