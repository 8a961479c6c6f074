package servetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/nvdp-project/nvdp/api"
)

// contract is api/openapi.yaml, loaded and validated once, with its router.
var contract struct {
	once   sync.Once
	doc    *openapi3.T
	router routers.Router
	err    error
}

// loadContract loads api.OpenAPI (kin-openapi, OpenAPI 3.1: JSON Schema
// 2020-12), checks it, and routes on its paths whatever the server's
// address (its servers list names the default one).
func loadContract() (*openapi3.T, routers.Router, error) {
	contract.once.Do(func() {
		loader := openapi3.NewLoader()
		doc, err := loader.LoadFromData(api.OpenAPI)
		if err != nil {
			contract.err = fmt.Errorf("api/openapi.yaml: %w", err)
			return
		}
		if err := doc.Validate(loader.Context); err != nil {
			contract.err = fmt.Errorf("api/openapi.yaml: %w", err)
			return
		}
		doc.Servers = nil
		contract.doc = doc
		contract.router, contract.err = legacy.NewRouter(doc)
	})
	return contract.doc, contract.router, contract.err
}

// Contract checks one exchange with a release server against
// api/openapi.yaml; docs/serving.md, "The contract". Failures are tb's
// errors.
//
// The response, its status, headers and body, must be one the document
// describes for the route; an unknown route or method must get the 404 or
// 405 Error. It must carry every header the document requires for it:
// X-Request-Id is on every response of the service, while Go's HTTP
// server's own 400 and 431 carry none. A request the document does not
// allow, such as a malformed body or a wrong parameter, must have been
// refused with a 4xx. A request without a Content-Type is checked as
// application/json, as the server reads it.
func Contract(tb testing.TB, req *http.Request, reqBody []byte, resp *http.Response, respBody []byte) {
	tb.Helper()
	doc, router, err := loadContract()
	if err != nil {
		tb.Fatal(err)
	}
	ctx := context.Background()
	what := fmt.Sprintf("%s %s -> %d", req.Method, req.URL.RequestURI(), resp.StatusCode)
	r := req.Clone(ctx)
	r.Body = io.NopCloser(bytes.NewReader(reqBody))
	if len(reqBody) > 0 && r.Header.Get("Content-Type") == "" {
		r.Header.Set("Content-Type", "application/json")
	}
	route, params, err := router.FindRoute(r)
	if err != nil { // no such path or method: the server's 404 or 405, an Error
		if resp.Header.Get("X-Request-Id") == "" {
			tb.Errorf("contract: %s: no X-Request-Id header", what)
		}
		if resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusMethodNotAllowed {
			tb.Errorf("contract: %s: the route is not in api/openapi.yaml (%v)", what, err)
			return
		}
		var v any
		if err := json.Unmarshal(respBody, &v); err != nil {
			tb.Errorf("contract: %s: body is not JSON: %v", what, err)
			return
		}
		if err := doc.Components.Schemas["Error"].Value.VisitJSON(v, openapi3.EnableJSONSchema2020()); err != nil {
			tb.Errorf("contract: %s: not an Error: %v", what, err)
		}
		return
	}
	opts := &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, IncludeResponseStatus: true, MultiError: true}
	in := &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: route, Options: opts}
	if err := openapi3filter.ValidateRequest(ctx, in); err != nil && (resp.StatusCode < 400 || resp.StatusCode >= 500) {
		tb.Errorf("contract: %s: api/openapi.yaml refuses the request, the server answered %d: %v", what, resp.StatusCode, err)
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header, Options: opts}
	out.SetBodyBytes(respBody)
	if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
		tb.Errorf("contract: %s: the response is not api/openapi.yaml's: %v\nbody: %.2000s", what, err, respBody)
	}
	for name, h := range responseHeaders(route.Operation, resp.StatusCode) {
		if h.Value != nil && h.Value.Required && resp.Header.Get(name) == "" {
			tb.Errorf("contract: %s: no %s header", what, name)
		}
	}
}

// responseHeaders are the headers op documents for status.
func responseHeaders(op *openapi3.Operation, status int) openapi3.Headers {
	if r := op.Responses.Status(status); r != nil && r.Value != nil {
		return r.Value.Headers
	}
	return nil
}
