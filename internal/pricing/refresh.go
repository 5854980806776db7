package pricing

import (
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// The parsers below read the clouds' public price lists as they answer, and keep the prices
// the estimate uses, named by the book's SKUs. Anything else in a list is skipped.

// awsOffer is an AWS Price List bulk offer file (…/offers/v1.0/aws/<offer>/current/<region>/index.json).
type awsOffer struct {
	OfferCode       string `json:"offerCode"`
	PublicationDate string `json:"publicationDate"`
	Products        map[string]struct {
		SKU           string            `json:"sku"`
		ProductFamily string            `json:"productFamily"`
		Attributes    map[string]string `json:"attributes"`
	} `json:"products"`
	Terms struct {
		OnDemand map[string]map[string]struct {
			PriceDimensions map[string]struct {
				Unit         string            `json:"unit"`
				BeginRange   string            `json:"beginRange"`
				PricePerUnit map[string]string `json:"pricePerUnit"`
			} `json:"priceDimensions"`
		} `json:"OnDemand"`
	} `json:"terms"`
}

// ParseAWS reads an AWS Price List bulk offer file (AmazonEC2, AmazonRDS, AmazonEKS).
func ParseAWS(r io.Reader) ([]Entry, error) {
	var o awsOffer
	if err := json.NewDecoder(r).Decode(&o); err != nil {
		return nil, fmt.Errorf("aws offer file: %w", err)
	}
	if o.OfferCode == "" || o.Products == nil {
		return nil, fmt.Errorf("aws offer file: no offerCode or products")
	}
	source := fmt.Sprintf("AWS Price List bulk API, %s, published %s", o.OfferCode, o.PublicationDate)
	date := dateOf(o.PublicationDate)
	var out []Entry
	for id, p := range o.Products {
		a := p.Attributes
		var sku, unit string
		switch {
		case o.OfferCode == "AmazonEC2" && p.ProductFamily == "Compute Instance" && a["operatingSystem"] == "Linux" &&
			a["tenancy"] == "Shared" && a["preInstalledSw"] == "NA" && a["capacitystatus"] == "Used" && a["licenseModel"] != "Bring your own license":
			sku, unit = "ec2.instance."+a["instanceType"], "hour"
		case o.OfferCode == "AmazonEC2" && p.ProductFamily == "NAT Gateway" && strings.HasSuffix(a["usagetype"], "NatGateway-Hours"):
			sku, unit = "vpc.nat", "hour"
		case o.OfferCode == "AmazonEC2" && p.ProductFamily == "NAT Gateway" && strings.HasSuffix(a["usagetype"], "NatGateway-Bytes"):
			sku, unit = "vpc.nat.data", "GB"
		case o.OfferCode == "AmazonRDS" && p.ProductFamily == "Database Instance" && (a["databaseEngine"] == "PostgreSQL" || a["databaseEngine"] == "MySQL") &&
			(a["deploymentOption"] == "Single-AZ" || a["deploymentOption"] == "Multi-AZ"):
			engine := map[string]string{"PostgreSQL": "postgres", "MySQL": "mysql"}[a["databaseEngine"]]
			sku, unit = fmt.Sprintf("rds.%s.%s.%s", engine, a["instanceType"], strings.ToLower(a["deploymentOption"])), "hour"
		case o.OfferCode == "AmazonEKS" && strings.HasSuffix(a["usagetype"], "AmazonEKS-Hours:perCluster"):
			sku, unit = "eks.cluster", "hour"
		default:
			continue
		}
		price, ok := awsOnDemand(o, id)
		if !ok || a["regionCode"] == "" {
			continue
		}
		out = append(out, Entry{Cloud: "aws", Region: a["regionCode"], SKU: sku, Unit: unit, Price: price, Source: source, Date: date})
	}
	return sorted(out), nil
}

// awsOnDemand is the first-tier USD price of product id.
func awsOnDemand(o awsOffer, id string) (float64, bool) {
	for _, term := range o.Terms.OnDemand[id] {
		for _, d := range term.PriceDimensions {
			if d.BeginRange != "" && d.BeginRange != "0" {
				continue
			}
			v, err := strconv.ParseFloat(d.PricePerUnit["USD"], 64)
			if err == nil {
				return v, true
			}
		}
	}
	return 0, false
}

// azurePrices is one page of the Azure Retail Prices API (https://prices.azure.com/api/retail/prices).
type azurePrices struct {
	Items []struct {
		CurrencyCode       string  `json:"currencyCode"`
		RetailPrice        float64 `json:"retailPrice"`
		ArmRegionName      string  `json:"armRegionName"`
		ArmSkuName         string  `json:"armSkuName"`
		ServiceName        string  `json:"serviceName"`
		ProductName        string  `json:"productName"`
		MeterName          string  `json:"meterName"`
		SkuName            string  `json:"skuName"`
		UnitOfMeasure      string  `json:"unitOfMeasure"`
		Type               string  `json:"type"`
		EffectiveStartDate string  `json:"effectiveStartDate"`
	} `json:"Items"`
}

// ParseAzure reads a page of the Azure Retail Prices API: Linux pay-as-you-go VM prices.
func ParseAzure(r io.Reader) ([]Entry, error) {
	var p azurePrices
	if err := json.NewDecoder(r).Decode(&p); err != nil {
		return nil, fmt.Errorf("azure retail prices: %w", err)
	}
	var out []Entry
	for _, it := range p.Items {
		if it.ServiceName != "Virtual Machines" || it.Type != "Consumption" || it.CurrencyCode != "USD" || it.UnitOfMeasure != "1 Hour" ||
			strings.Contains(it.ProductName, "Windows") || strings.Contains(it.SkuName, "Spot") || strings.Contains(it.SkuName, "Low Priority") {
			continue
		}
		out = append(out, Entry{Cloud: "azure", Region: it.ArmRegionName, SKU: "vm." + it.ArmSkuName, Unit: "hour", Price: it.RetailPrice,
			Source: "Azure Retail Prices API, " + it.ProductName + " " + it.MeterName, Date: dateOf(it.EffectiveStartDate)})
	}
	return sorted(out), nil
}

// gcpSKUs is one page of the Cloud Billing Catalog API's services.skus.list.
type gcpSKUs struct {
	SKUs []struct {
		SKUID       string `json:"skuId"`
		Description string `json:"description"`
		Category    struct {
			ServiceDisplayName string `json:"serviceDisplayName"`
			UsageType          string `json:"usageType"`
		} `json:"category"`
		ServiceRegions []string `json:"serviceRegions"`
		PricingInfo    []struct {
			EffectiveTime     string `json:"effectiveTime"`
			PricingExpression struct {
				UsageUnit   string `json:"usageUnit"`
				TieredRates []struct {
					StartUsageAmount float64 `json:"startUsageAmount"`
					UnitPrice        struct {
						CurrencyCode string `json:"currencyCode"`
						Units        string `json:"units"`
						Nanos        int64  `json:"nanos"`
					} `json:"unitPrice"`
				} `json:"tieredRates"`
			} `json:"pricingExpression"`
		} `json:"pricingInfo"`
	} `json:"skus"`
}

var gcpInstance = regexp.MustCompile(`^([A-Z][A-Z0-9]*) Instance (Core|Ram) running in `)

// ParseGCP reads a page of the Cloud Billing Catalog's Compute Engine SKUs: on-demand vCPU
// and memory prices per machine series.
func ParseGCP(r io.Reader) ([]Entry, error) {
	var p gcpSKUs
	if err := json.NewDecoder(r).Decode(&p); err != nil {
		return nil, fmt.Errorf("gcp billing catalog: %w", err)
	}
	var out []Entry
	for _, s := range p.SKUs {
		m := gcpInstance.FindStringSubmatch(s.Description)
		if m == nil || s.Category.ServiceDisplayName != "Compute Engine" || s.Category.UsageType != "OnDemand" || len(s.PricingInfo) == 0 {
			continue
		}
		pi := s.PricingInfo[0]
		var price float64
		found := false
		for _, t := range pi.PricingExpression.TieredRates {
			if t.StartUsageAmount == 0 && t.UnitPrice.CurrencyCode == "USD" {
				units, _ := strconv.ParseFloat(firstNonEmpty(t.UnitPrice.Units, "0"), 64)
				price, found = units+float64(t.UnitPrice.Nanos)/1e9, true
			}
		}
		if !found {
			continue
		}
		sku, unit := "gce."+strings.ToLower(m[1])+".core", "vCPU-hour"
		if m[2] == "Ram" {
			sku, unit = "gce."+strings.ToLower(m[1])+".ram", "GiB-hour"
		}
		for _, region := range s.ServiceRegions {
			out = append(out, Entry{Cloud: "gcp", Region: region, SKU: sku, Unit: unit, Price: price,
				Source: "Cloud Billing Catalog, Compute Engine SKU " + s.SKUID, Date: dateOf(pi.EffectiveTime)})
		}
	}
	return sorted(out), nil
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// dateOf is the day of an RFC 3339 timestamp (or the string itself).
func dateOf(ts string) string {
	if len(ts) >= 10 {
		return ts[:10]
	}
	return ts
}

func sorted(es []Entry) []Entry {
	sort.Slice(es, func(i, j int) bool {
		return key(es[i].Cloud, es[i].Region, es[i].SKU) < key(es[j].Cloud, es[j].Region, es[j].SKU)
	})
	return es
}
