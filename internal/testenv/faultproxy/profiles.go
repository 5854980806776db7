package faultproxy

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
)

// credentialScope finds the service in a SigV4 Authorization header
// ("Credential=AKID/20260101/eu-west-1/ec2/aws4_request").
var credentialScope = regexp.MustCompile(`Credential=[^/]+/[^/]+/[^/]+/([^/]+)/aws4_request`)

func awsService(r *http.Request) string {
	if m := credentialScope.FindStringSubmatch(r.Header.Get("Authorization")); m != nil {
		return m[1]
	}
	return "unknown"
}

// awsAction is the operation name of a query-protocol (form body) or JSON-protocol
// (X-Amz-Target) call, or "" for a REST call.
func awsAction(c Call) string {
	if t := c.Req.Header.Get("X-Amz-Target"); t != "" {
		if i := strings.LastIndexByte(t, '.'); i >= 0 {
			return t[i+1:]
		}
		return t
	}
	if strings.HasPrefix(c.Req.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		if v, err := url.ParseQuery(string(c.Body)); err == nil {
			return v.Get("Action")
		}
	}
	return ""
}

// restPath drops the identifiers out of a REST path so that calls on different resources of
// one kind share a key: /clusters/web/node-groups -> /clusters/*/node-groups.
var restID = regexp.MustCompile(`/[^/]*[0-9][^/]*`)

func restKey(r *http.Request) string {
	return r.Method + " " + restID.ReplaceAllString(r.URL.Path, "/*")
}

// AWS is the profile of the AWS APIs (query, EC2, JSON, REST-JSON and REST-XML protocols).
// Reads are the actions named Describe*, List* and Get* and REST GETs; everything else is a
// mutation. The throttling answer is the one each protocol's real endpoint gives.
var AWS = Profile{
	Name: "aws",
	Operation: func(c Call) string {
		svc := awsService(c.Req)
		if a := awsAction(c); a != "" {
			return svc + ":" + a
		}
		return svc + ":" + restKey(c.Req)
	},
	Mutating: func(c Call) bool {
		if a := awsAction(c); a != "" {
			for _, read := range []string{"Describe", "List", "Get"} {
				if strings.HasPrefix(a, read) {
					return false
				}
			}
			return true
		}
		return c.Req.Method != http.MethodGet && c.Req.Method != http.MethodHead
	},
	Throttled: func(w http.ResponseWriter, c Call) {
		svc := awsService(c.Req)
		switch {
		case c.Req.Header.Get("X-Amz-Target") != "":
			w.Header().Set("Content-Type", "application/x-amz-json-1.1")
			w.Header().Set("X-Amzn-ErrorType", "ThrottlingException")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"__type":"ThrottlingException","message":"Rate exceeded"}`))
		case svc == "ec2":
			w.Header().Set("Content-Type", "text/xml")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Response><Errors><Error><Code>RequestLimitExceeded</Code><Message>Request limit exceeded.</Message></Error></Errors><RequestID>faultproxy</RequestID></Response>`))
		case awsAction(c) != "" || svc == "route53":
			w.Header().Set("Content-Type", "text/xml")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><ErrorResponse><Error><Type>Sender</Type><Code>Throttling</Code><Message>Rate exceeded</Message></Error><RequestId>faultproxy</RequestId></ErrorResponse>`))
		default:
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("X-Amzn-ErrorType", "ThrottlingException")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"message":"Rate exceeded"}`))
		}
	},
}

// REST is a profile for a JSON REST API whose writes are every method but GET and HEAD and
// whose throttling answer is a 429 with body (the GCP and Azure fakes).
func REST(name, throttledBody string) Profile {
	return Profile{
		Name:      name,
		Operation: func(c Call) string { return restKey(c.Req) },
		Mutating: func(c Call) bool {
			return c.Req.Method != http.MethodGet && c.Req.Method != http.MethodHead
		},
		Throttled: func(w http.ResponseWriter, _ Call) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(throttledBody))
		},
	}
}

// GCP answers throttled calls as Google APIs do.
var GCP = REST("gcp", `{"error":{"code":429,"message":"Quota exceeded (faultproxy)","status":"RESOURCE_EXHAUSTED"}}`)

// Azure answers throttled calls as Azure Resource Manager does.
var Azure = REST("azure", `{"error":{"code":"TooManyRequests","message":"Too many requests (faultproxy)"}}`)
