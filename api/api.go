// Package api holds the contract of the release service of package serve
// (`nvdp serve`): openapi.yaml, OpenAPI 3.1, every route, body, error and
// header. The server serves it at GET /v1/openapi.yaml, and the tests of
// serve and cmd/nvdp validate every request and response they make against
// it (servetest.Contract).
package api

import _ "embed"

// OpenAPI is the service's OpenAPI 3.1 document (openapi.yaml).
//
//go:embed openapi.yaml
var OpenAPI []byte
