package azure

import (
	"context"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/mysql/armmysqlflexibleservers"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/postgresql/armpostgresqlflexibleservers/v4"

	ds "github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/fault"
)

// serverSpec is a flexible server as the driver asks for it, either service's.
type serverSpec struct {
	location         string
	tags             map[string]*string
	sizing           sizing
	password         string
	subnetID, zoneID string
}

// flexServers are the calls the driver makes of a flexible server service. PostgreSQL's and
// MySQL's modules model the same resource with their own types.
type flexServers interface {
	get(ctx context.Context, rg, name string) (serverView, map[string]*string, error)
	// begin starts the server's create; the operation is not awaited (Status reads the
	// server's state).
	begin(ctx context.Context, rg, name string, s serverSpec) error
	beginDelete(ctx context.Context, rg, name string) error
	// update brings the server to s's settings named in fields (instanceClass,
	// allocatedStorageGB, backupRetentionDays, multiAZ) through the service's PATCH, sending
	// only those; it starts the operation, or polls the one recorded in ops under key, and
	// reports whether it is done.
	update(ctx context.Context, c *Client, ops Ops, key, rg, name string, s sizing, fields []string) (bool, error)
}

func flexOf(c *Client, e ds.Engine) (flexServers, error) {
	switch e {
	case ds.EnginePostgres:
		cl, err := armpostgresqlflexibleservers.NewServersClient(c.SubscriptionID, c.cred, c.opts)
		if err != nil {
			return nil, fault.System(err)
		}
		return pgServers{cl}, nil
	case ds.EngineMySQL:
		cl, err := armmysqlflexibleservers.NewServersClient(c.SubscriptionID, c.cred, c.opts)
		if err != nil {
			return nil, fault.System(err)
		}
		return mysqlServers{cl}, nil
	}
	_, err := engineOf(e)
	return nil, err
}

type pgServers struct {
	c *armpostgresqlflexibleservers.ServersClient
}

func (p pgServers) get(ctx context.Context, rg, name string) (serverView, map[string]*string, error) {
	v, err := p.c.Get(ctx, rg, name, nil)
	if err != nil {
		return serverView{}, nil, err
	}
	out := serverView{id: deref(v.ID)}
	if v.SKU != nil {
		out.sku = deref(v.SKU.Name)
	}
	if pr := v.Properties; pr != nil {
		out.fqdn = deref(pr.FullyQualifiedDomainName)
		if pr.State != nil {
			out.state = string(*pr.State)
		}
		if pr.Storage != nil && pr.Storage.StorageSizeGB != nil {
			out.storageGB = *pr.Storage.StorageSizeGB
		}
		if pr.Backup != nil && pr.Backup.BackupRetentionDays != nil {
			out.backups = *pr.Backup.BackupRetentionDays
		}
		out.ha = pr.HighAvailability != nil && pr.HighAvailability.Mode != nil && *pr.HighAvailability.Mode != armpostgresqlflexibleservers.HighAvailabilityModeDisabled
	}
	return out, v.Tags, nil
}

func (p pgServers) update(ctx context.Context, c *Client, ops Ops, key, rg, name string, s sizing, fields []string) (bool, error) {
	var u armpostgresqlflexibleservers.ServerForUpdate
	props := &armpostgresqlflexibleservers.ServerPropertiesForUpdate{}
	for _, f := range fields {
		switch f {
		case "instanceClass":
			u.SKU = &armpostgresqlflexibleservers.SKU{Name: to.Ptr(s.sku), Tier: to.Ptr(armpostgresqlflexibleservers.SKUTier(s.tier))}
		case "allocatedStorageGB":
			props.Storage = &armpostgresqlflexibleservers.Storage{StorageSizeGB: to.Ptr(s.storageGB)}
		case "backupRetentionDays":
			props.Backup = &armpostgresqlflexibleservers.Backup{BackupRetentionDays: to.Ptr(s.backups)}
		case "multiAZ":
			ha := armpostgresqlflexibleservers.HighAvailabilityModeDisabled
			if s.ha {
				ha = armpostgresqlflexibleservers.HighAvailabilityModeZoneRedundant
			}
			props.HighAvailability = &armpostgresqlflexibleservers.HighAvailability{Mode: to.Ptr(ha)}
		}
	}
	if props.Storage != nil || props.Backup != nil || props.HighAvailability != nil {
		u.Properties = props
	}
	begin := func(ctx context.Context, tok string) (*runtime.Poller[armpostgresqlflexibleservers.ServersClientUpdateResponse], error) {
		return p.c.BeginUpdate(ctx, rg, name, u, &armpostgresqlflexibleservers.ServersClientBeginUpdateOptions{ResumeToken: tok})
	}
	return startOrPoll(ctx, c, ops, key, begin)
}

func (p pgServers) begin(ctx context.Context, rg, name string, s serverSpec) error {
	ha := armpostgresqlflexibleservers.HighAvailabilityModeDisabled
	if s.sizing.ha {
		ha = armpostgresqlflexibleservers.HighAvailabilityModeZoneRedundant
	}
	_, err := p.c.BeginCreate(ctx, rg, name, armpostgresqlflexibleservers.Server{
		Location: to.Ptr(s.location), Tags: s.tags,
		SKU: &armpostgresqlflexibleservers.SKU{Name: to.Ptr(s.sizing.sku), Tier: to.Ptr(armpostgresqlflexibleservers.SKUTier(s.sizing.tier))},
		Properties: &armpostgresqlflexibleservers.ServerProperties{
			CreateMode:                 to.Ptr(armpostgresqlflexibleservers.CreateModeCreate),
			Version:                    to.Ptr(armpostgresqlflexibleservers.ServerVersion(s.sizing.version)),
			AdministratorLogin:         to.Ptr(adminUser),
			AdministratorLoginPassword: to.Ptr(s.password),
			Storage:                    &armpostgresqlflexibleservers.Storage{StorageSizeGB: to.Ptr(s.sizing.storageGB)},
			Backup: &armpostgresqlflexibleservers.Backup{BackupRetentionDays: to.Ptr(s.sizing.backups),
				GeoRedundantBackup: to.Ptr(armpostgresqlflexibleservers.GeoRedundantBackupEnumDisabled)},
			HighAvailability: &armpostgresqlflexibleservers.HighAvailability{Mode: to.Ptr(ha)},
			Network: &armpostgresqlflexibleservers.Network{DelegatedSubnetResourceID: to.Ptr(s.subnetID),
				PrivateDNSZoneArmResourceID: to.Ptr(s.zoneID),
				PublicNetworkAccess:         to.Ptr(armpostgresqlflexibleservers.ServerPublicNetworkAccessStateDisabled)},
		},
	}, nil)
	return err
}

func (p pgServers) beginDelete(ctx context.Context, rg, name string) error {
	_, err := p.c.BeginDelete(ctx, rg, name, nil)
	return err
}

type mysqlServers struct {
	c *armmysqlflexibleservers.ServersClient
}

func (m mysqlServers) get(ctx context.Context, rg, name string) (serverView, map[string]*string, error) {
	v, err := m.c.Get(ctx, rg, name, nil)
	if err != nil {
		return serverView{}, nil, err
	}
	out := serverView{id: deref(v.ID)}
	if v.SKU != nil {
		out.sku = deref(v.SKU.Name)
	}
	if pr := v.Properties; pr != nil {
		out.fqdn = deref(pr.FullyQualifiedDomainName)
		if pr.State != nil {
			out.state = string(*pr.State)
		}
		if pr.Storage != nil && pr.Storage.StorageSizeGB != nil {
			out.storageGB = *pr.Storage.StorageSizeGB
		}
		if pr.Backup != nil && pr.Backup.BackupRetentionDays != nil {
			out.backups = *pr.Backup.BackupRetentionDays
		}
		out.ha = pr.HighAvailability != nil && pr.HighAvailability.Mode != nil && *pr.HighAvailability.Mode != armmysqlflexibleservers.HighAvailabilityModeDisabled
	}
	return out, v.Tags, nil
}

func (m mysqlServers) update(ctx context.Context, c *Client, ops Ops, key, rg, name string, s sizing, fields []string) (bool, error) {
	var u armmysqlflexibleservers.ServerForUpdate
	props := &armmysqlflexibleservers.ServerPropertiesForUpdate{}
	for _, f := range fields {
		switch f {
		case "instanceClass":
			u.SKU = &armmysqlflexibleservers.SKU{Name: to.Ptr(s.sku), Tier: to.Ptr(armmysqlflexibleservers.SKUTier(s.tier))}
		case "allocatedStorageGB":
			props.Storage = &armmysqlflexibleservers.Storage{StorageSizeGB: to.Ptr(s.storageGB)}
		case "backupRetentionDays":
			props.Backup = &armmysqlflexibleservers.Backup{BackupRetentionDays: to.Ptr(s.backups)}
		case "multiAZ":
			ha := armmysqlflexibleservers.HighAvailabilityModeDisabled
			if s.ha {
				ha = armmysqlflexibleservers.HighAvailabilityModeZoneRedundant
			}
			props.HighAvailability = &armmysqlflexibleservers.HighAvailability{Mode: to.Ptr(ha)}
		}
	}
	if props.Storage != nil || props.Backup != nil || props.HighAvailability != nil {
		u.Properties = props
	}
	begin := func(ctx context.Context, tok string) (*runtime.Poller[armmysqlflexibleservers.ServersClientUpdateResponse], error) {
		return m.c.BeginUpdate(ctx, rg, name, u, &armmysqlflexibleservers.ServersClientBeginUpdateOptions{ResumeToken: tok})
	}
	return startOrPoll(ctx, c, ops, key, begin)
}

func (m mysqlServers) begin(ctx context.Context, rg, name string, s serverSpec) error {
	ha := armmysqlflexibleservers.HighAvailabilityModeDisabled
	if s.sizing.ha {
		ha = armmysqlflexibleservers.HighAvailabilityModeZoneRedundant
	}
	_, err := m.c.BeginCreate(ctx, rg, name, armmysqlflexibleservers.Server{
		Location: to.Ptr(s.location), Tags: s.tags,
		SKU: &armmysqlflexibleservers.SKU{Name: to.Ptr(s.sizing.sku), Tier: to.Ptr(armmysqlflexibleservers.SKUTier(s.sizing.tier))},
		Properties: &armmysqlflexibleservers.ServerProperties{
			CreateMode:                 to.Ptr(armmysqlflexibleservers.CreateModeDefault),
			Version:                    to.Ptr(armmysqlflexibleservers.ServerVersion(s.sizing.version)),
			AdministratorLogin:         to.Ptr(adminUser),
			AdministratorLoginPassword: to.Ptr(s.password),
			Storage: &armmysqlflexibleservers.Storage{StorageSizeGB: to.Ptr(s.sizing.storageGB),
				AutoGrow: to.Ptr(armmysqlflexibleservers.EnableStatusEnumEnabled)},
			Backup: &armmysqlflexibleservers.Backup{BackupRetentionDays: to.Ptr(s.sizing.backups),
				GeoRedundantBackup: to.Ptr(armmysqlflexibleservers.EnableStatusEnumDisabled)},
			HighAvailability: &armmysqlflexibleservers.HighAvailability{Mode: to.Ptr(ha)},
			Network: &armmysqlflexibleservers.Network{DelegatedSubnetResourceID: to.Ptr(s.subnetID),
				PrivateDNSZoneResourceID: to.Ptr(s.zoneID),
				PublicNetworkAccess:      to.Ptr(armmysqlflexibleservers.EnableStatusEnumDisabled)},
		},
	}, nil)
	return err
}

func (m mysqlServers) beginDelete(ctx context.Context, rg, name string) error {
	_, err := m.c.BeginDelete(ctx, rg, name, nil)
	return err
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
