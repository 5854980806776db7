package kube

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/groundworkhq/groundwork/internal/cluster"
	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/netguard"
)

// Codes of the user_action and transient errors this package returns.
const (
	CodeUnreachable      = "ClusterUnreachable"
	CodeUnauthorized     = "ClusterUnauthorized"
	CodeForbidden        = "ClusterForbidden"
	CodeCertificate      = "ClusterCertificate"
	CodeInvalidChart     = "InvalidChart"
	CodeChartCertificate = "ChartRepositoryCertificate"
	CodeInvalidValues    = cluster.CodeInvalidValues
	CodeReleaseConflict  = "ReleaseConflict"
)

const reRegisterHint = "register the cluster again with credentials that are valid now"

// classify wraps err (from client-go or Helm, which wraps client-go) with its fault class.
// The chain is inspected by type, never by message: a refused connection, a timeout or a 5xx
// is the cluster being away (transient); a 401/403 or an unknown CA needs the user.
func classify(op string, err error) error {
	if err == nil {
		return nil
	}
	if isClassified(err) {
		return err
	}
	wrapped := fmt.Errorf("%s: %w", op, err)
	switch {
	case errors.Is(err, netguard.ErrRefused):
		return fault.UserAction(wrapped, "OutboundRefused",
			"the cluster's address is refused by Groundwork's outbound policy (link-local and metadata addresses, or outside --outbound-allow)", "")
	case apierrors.IsUnauthorized(err):
		return fault.UserAction(wrapped, CodeUnauthorized, reRegisterHint, "")
	case apierrors.IsForbidden(err):
		return fault.UserAction(wrapped, CodeForbidden, "grant the registered identity cluster-admin, or register the cluster with one that has it", "")
	case isCertificate(err):
		return fault.UserAction(wrapped, CodeCertificate, "register the cluster again with the CA that signed its API server certificate", "")
	case isUnreachable(err):
		return transient(wrapped, CodeUnreachable)
	case apierrors.IsServerTimeout(err), apierrors.IsTimeout(err), apierrors.IsTooManyRequests(err),
		apierrors.IsServiceUnavailable(err), apierrors.IsInternalError(err), apierrors.IsUnexpectedServerError(err):
		return transient(wrapped, "ClusterBusy")
	case apierrors.IsConflict(err):
		// An optimistic-concurrency conflict: another writer won a race; a retry re-reads.
		return transient(wrapped, "Conflict")
	}
	return err
}

func isClassified(err error) bool {
	var fe *fault.Error
	return errors.As(err, &fe)
}

func transient(err error, code string) error {
	fe := fault.Transient(err).(*fault.Error)
	return fe.WithCode(code)
}

// isUnreachable reports network-level failures: nothing answered, or the answer broke off.
func isUnreachable(err error) bool {
	var netErr net.Error
	var opErr *net.OpError
	var dnsErr *net.DNSError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return true
	case errors.As(err, &opErr), errors.As(err, &dnsErr):
		return true
	case errors.As(err, &netErr) && netErr.Timeout():
		return true
	}
	return false
}

// isCertificate reports whether err is a server certificate that does not verify.
func isCertificate(err error) bool {
	var unknownCA x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var certErr x509.CertificateInvalidError
	var verifyErr *tls.CertificateVerificationError
	return errors.As(err, &unknownCA) || errors.As(err, &hostErr) || errors.As(err, &certErr) || errors.As(err, &verifyErr)
}
