package serve_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/api"
	"sigs.k8s.io/yaml"
)

// TestOpenAPIServed: GET /v1/openapi.yaml serves api/openapi.yaml as it is,
// and every path and method the document describes is a route of the
// server (none answers 404 or 405), so the document and the server list
// the same routes.
func TestOpenAPIServed(t *testing.T) {
	f := newFixture(t, 50, nil)
	resp, err := http.Get(f.http.URL + "/v1/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Equal(b, api.OpenAPI) || resp.Header.Get("Content-Type") != "application/yaml" {
		t.Fatalf("GET /v1/openapi.yaml: %d %s, %d bytes", resp.StatusCode, resp.Header.Get("Content-Type"), len(b))
	}
	var doc struct {
		OpenAPI string                    `json:"openapi"`
		Paths   map[string]map[string]any `json:"paths"`
	}
	if err := yaml.Unmarshal(api.OpenAPI, &doc); err != nil || !strings.HasPrefix(doc.OpenAPI, "3.1") {
		t.Fatalf("the document: %v, openapi %q", err, doc.OpenAPI)
	}
	n := 0
	for path, methods := range doc.Paths {
		for m := range methods {
			code, body := f.do(t, strings.ToUpper(m), path, f.alice, "application/json", `{"texts": ["a"]}`)
			if code == 404 || code == 405 {
				t.Errorf("%s %s: %d %v", m, path, code, body)
			}
			n++
		}
	}
	if n != 7 {
		t.Errorf("%d routes in the document, want the server's 7", n)
	}
}

// pythonWithNumpy is a python3 that imports numpy: the one on PATH, else
// Debian's.
func pythonWithNumpy() (string, error) {
	var tried []string
	for _, p := range []string{"python3", "/usr/bin/python3"} {
		path, err := exec.LookPath(p)
		if err != nil {
			continue
		}
		if exec.Command(path, "-c", "import numpy").Run() == nil {
			return path, nil
		}
		tried = append(tried, path)
	}
	if len(tried) == 0 {
		return "", errors.New("no python3")
	}
	return "", errors.New("no numpy in " + strings.Join(tried, ", ") + " (apt-get install python3-numpy)")
}

// TestPythonExample runs the Python client of docs/serving.md ("From
// Python") against a live server on the fake model: it prints the shapes
// of the releases, the guarantee and the balance, and the charges of its
// history; the server saw its requests (the ledger charged 2 releases).
func TestPythonExample(t *testing.T) {
	py, err := pythonWithNumpy()
	if err != nil {
		t.Skip("TestPythonExample: " + err.Error())
	}
	doc, err := os.ReadFile(filepath.Join("..", "docs", "serving.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "### From Python")
	if ok {
		_, rest, ok = strings.Cut(rest, "```python\n")
	}
	code, _, ok2 := strings.Cut(rest, "```\n")
	if !ok || !ok2 {
		t.Fatal(`docs/serving.md has no "### From Python" section with a python block`)
	}
	script := filepath.Join(t.TempDir(), "client.py")
	if err := os.WriteFile(script, []byte(code), 0o600); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, 50, nil)
	cmd := exec.Command(py, script)
	cmd.Env = append(os.Environ(), "NVDP_URL="+f.http.URL, "NVDP_API_KEY="+f.alice)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", py, script, err, out)
	}
	for _, want := range []string{"Z (2, 3, 4) pi (2, 3) weights sum to [1.0, 1.0]", "per release at delta 1e-05; spent", "of 50;", "releases remain", "binary Z (1, 3, 4) pi (1, 3) spent", " 2 releases at epsilon", " 1 releases at epsilon"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the example's output lacks %q:\n%s", want, out)
		}
	}
	if accts, _ := f.ledger.Accounts(); len(accts) != 1 || accts[0].Releases != 3 {
		t.Errorf("ledger %+v", accts)
	}
}
