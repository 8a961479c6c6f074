package servetest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// recorder is a testing.TB that records the errors reported to it.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, a ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, a...))
}
func (r *recorder) Fatal(a ...any) { r.TB.Fatal(a...) }

// TestContractCatches: Contract accepts an exchange api/openapi.yaml
// describes and reports each way one can depart from it: an undocumented
// field, status or missing header, a wrong type, a success for a request
// the document refuses, an unknown route answered otherwise than 404.
func TestContractCatches(t *testing.T) {
	const okBody = `{"budget":{"account":"alice","releases":2,"spent_epsilon":1.5,"accountant":"rdp","budget_epsilon":"Infinity","remaining_epsilon":"Infinity","remaining_releases":"Infinity","delta":1e-05}}`
	errBody := `{"error":{"code":"bad_json","message":"x","request_id":"0123456789abcdef"}}`
	for _, tc := range []struct {
		name, method, target, reqBody string
		status                        int
		header                        map[string]string
		body                          string
		want                          string // "" : no error
	}{
		{"a documented answer", "GET", "/v1/budget?history=2", "", 200, nil, okBody, ""},
		{"an Error", "POST", "/v1/embed", `{"texts": "x"}`, 400, nil, errBody, ""},
		{"an unknown route's 404", "GET", "/v2/x", "", 404, nil, errBody, ""},
		{"an undocumented field", "GET", "/v1/budget", "", 200, nil, strings.Replace(okBody, `"delta"`, `"extra":1,"delta"`, 1), "the response is not api/openapi.yaml's"},
		{"a string where a number goes", "GET", "/v1/budget", "", 200, nil, strings.Replace(okBody, `"spent_epsilon":1.5`, `"spent_epsilon":"1.5"`, 1), "the response is not api/openapi.yaml's"},
		{"an unknown accountant", "GET", "/v1/budget", "", 200, nil, strings.Replace(okBody, `"rdp"`, `"rdp-sum"`, 1), "the response is not api/openapi.yaml's"},
		{"a balance without its accountant", "GET", "/v1/budget", "", 200, nil, strings.Replace(okBody, `"accountant":"rdp",`, ``, 1), "the response is not api/openapi.yaml's"},
		{"an undocumented status", "GET", "/v1/budget", "", 418, nil, errBody, "the response is not api/openapi.yaml's"},
		{"an undocumented error code", "GET", "/v1/budget", "", 400, nil, strings.Replace(errBody, "bad_json", "oops", 1), "the response is not api/openapi.yaml's"},
		{"no X-Request-Id", "GET", "/v1/budget", "", 200, map[string]string{"X-Request-Id": ""}, okBody, "no X-Request-Id header"},
		{"a 401 without WWW-Authenticate", "GET", "/v1/budget", "", 401, nil, strings.Replace(errBody, "bad_json", "unauthorized", 1), "WWW-Authenticate"},
		{"a refused request answered 200", "GET", "/v1/budget?history=0", "", 200, nil, okBody, "api/openapi.yaml refuses the request"},
		{"a body of the wrong type answered 200", "POST", "/v1/embed", `{"texts": [1]}`, 200, nil, `{"embeddings":[],"weights":[],"privacy":{}}`, "api/openapi.yaml refuses the request"},
		{"an unknown route answered 200", "GET", "/v2/x", "", 200, nil, okBody, "the route is not in api/openapi.yaml"},
		{"Go's 431", "GET", "/v1/info", "", 431, map[string]string{"Content-Type": "text/plain; charset=utf-8", "X-Request-Id": ""}, "431 Request Header Fields Too Large", ""},
		{"Go's 400", "GET", "/readyz", "", 400, map[string]string{"Content-Type": "text/plain; charset=utf-8", "X-Request-Id": ""}, "400 Bad Request", ""},
		{"a 503 without X-Request-Id", "GET", "/readyz", "", 503, map[string]string{"X-Request-Id": ""}, strings.Replace(errBody, "bad_json", "draining", 1), "no X-Request-Id header"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(tc.method, "http://127.0.0.1:9/"+strings.TrimPrefix(tc.target, "/"), strings.NewReader(tc.reqBody))
			resp := &http.Response{StatusCode: tc.status, Header: http.Header{"Content-Type": {"application/json"}, "X-Request-Id": {"0123456789abcdef"}}}
			for k, v := range tc.header {
				if v == "" {
					resp.Header.Del(k)
				} else {
					resp.Header.Set(k, v)
				}
			}
			r := &recorder{TB: t}
			Contract(r, req, []byte(tc.reqBody), resp, []byte(tc.body))
			got := strings.Join(r.errs, "\n")
			if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Fatalf("errors %q, want %q", got, tc.want)
			}
		})
	}
}
