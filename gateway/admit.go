package gateway

import (
	"errors"
	"net/http"

	"github.com/gatehouse-dev/gatehouse/gateway/admission"
)

// permit is an admitted request's hold on its gates, as Options.Admission
// grants it (*admission.Permit, or a cluster lease).
type permit = admission.Grant

// errClusterUnavailable is the 503 sent while a shared admission store
// is unreachable and the controller runs fail-closed.
var errClusterUnavailable = &apiError{status: http.StatusServiceUnavailable, code: CodeClusterUnavailable,
	message: "the shared admission store is unreachable; try again shortly", retryAfter: 1}

// clusterUnavailable reports whether err says the shared admission store is
// unreachable (gateway/cluster's *UnavailableError matches the sentinel).
func clusterUnavailable(err error) bool { return errors.Is(err, admission.ErrUnavailable) }
