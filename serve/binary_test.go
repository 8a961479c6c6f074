package serve_test

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/release"
	"github.com/nvdp-project/nvdp/safetensors"
	"github.com/nvdp-project/nvdp/serve"
	"github.com/nvdp-project/nvdp/serve/servetest"
)

// doAccept posts texts with an Accept header, checks the exchange against the contract and returns
// the response and its body.
func (f *fixture) doAccept(t *testing.T, accept string, texts ...string) (*http.Response, []byte) {
	t.Helper()
	b, _ := json.Marshal(map[string][]string{"texts": texts})
	req, err := http.NewRequest(http.MethodPost, f.http.URL+"/v1/embed", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+f.alice)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", accept)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	servetest.Contract(t, req, b, resp, body)
	return resp, body
}

// TestEmbedSafetensors: Accept: application/vnd.safetensors answers the releases as a safetensors
// file with nvdp embed's tensors (z [texts, 1, N, P], pi [texts, 1, N]) holding the fake's values,
// its metadata (release.ParseMetadataKeys reads it) and the response's privacy block; the charge is
// the JSON response's; the body's length depends only on the number of texts; a body after larger
// ones holds only its own release; an Accept that takes
// neither type is 406 before anything is released or charged.
func TestEmbedSafetensors(t *testing.T) {
	f := newFixture(t, 50, nil)
	resp, body := f.doAccept(t, serve.MediaSafetensors, "the first text", "a second one")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != serve.MediaSafetensors {
		t.Fatalf("status %d, Content-Type %q: %.200s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	file, err := safetensors.Parse(body)
	if err != nil {
		t.Fatalf("body: %v", err)
	}
	z, okZ := file.Get("z")
	pi, okPi := file.Get("pi")
	if !okZ || !okPi || len(file.Tensors) != 2 {
		t.Fatalf("%d tensors, z %v, pi %v", len(file.Tensors), okZ, okPi)
	}
	if got, want := z.Shape, []int{2, 1, 3, 4}; !slices.Equal(got, want) {
		t.Fatalf("z shape %v, want %v", got, want)
	}
	if got, want := pi.Shape, []int{2, 1, 3}; !slices.Equal(got, want) {
		t.Fatalf("pi shape %v, want %v", got, want)
	}
	zs, err := z.Float32()
	if err != nil {
		t.Fatal(err)
	}
	ps, err := pi.Float32()
	if err != nil {
		t.Fatal(err)
	}
	for i, text := range []string{"the first text", "a second one"} {
		want := servetest.Embed(text, 3, 4)
		for j, v := range want.Z {
			if zs[i*12+j] != v {
				t.Fatalf("text %d: z[%d] = %v, want %v", i, j, zs[i*12+j], v)
			}
		}
		for j, v := range want.Pi {
			if ps[i*3+j] != v {
				t.Fatalf("text %d: pi[%d] = %v, want %v", i, j, ps[i*3+j], v)
			}
		}
	}
	md, err := release.ParseMetadataKeys(file.Metadata)
	if err != nil {
		t.Fatal(err)
	}
	if md.Texts != 2 || md.ReleasesPerText != 1 || md.Releases != 2 || md.Layout != release.SafetensorsLayout || md.Guarantee == nil {
		t.Errorf("metadata %+v", md)
	}
	var priv map[string]any
	if err := json.Unmarshal([]byte(file.Metadata["privacy"]), &priv); err != nil {
		t.Fatalf("privacy metadata: %v", err)
	}
	if got, want := num(priv["spent_epsilon"]), epsOfReleases(2); math.Abs(got-want) > 1e-9*want || priv["account"] != "alice" || num(priv["releases"]) != 2 {
		t.Errorf("privacy metadata %v, want spent %v", priv, want)
	}
	// As many texts of other lengths: the same body length but for the privacy block's digits
	// (spent and remaining) and the header's padding to 8 bytes.
	_, body2 := f.doAccept(t, serve.MediaSafetensors, "x", strings.Repeat("longer text ", 20))
	if d := stripPrivacy(t, body2) - stripPrivacy(t, body); d < -7 || d > 7 {
		t.Errorf("body length %d for other texts, %d before (%d without the privacy block)", len(body2), len(body), d)
	}
	// A body after larger ones (whose memory it may reuse) holds its own text's release only.
	_, body1 := f.doAccept(t, serve.MediaSafetensors, "one")
	if one, err := safetensors.Parse(body1); err != nil {
		t.Errorf("one text: %v", err)
	} else if z1, ok := one.Get("z"); !ok || !slices.Equal(z1.Shape, []int{1, 1, 3, 4}) {
		t.Errorf("one text: z %v", z1.Shape)
	} else if zs1, err := z1.Float32(); err != nil || !slices.Equal(zs1, servetest.Embed("one", 3, 4).Z) {
		t.Errorf("one text: z %v (%v), want %v", zs1, err, servetest.Embed("one", 3, 4).Z)
	}
	started := f.fake.Started()
	resp, body = f.doAccept(t, "text/html", "a")
	if resp.StatusCode != http.StatusNotAcceptable || !strings.Contains(string(body), "not_acceptable") {
		t.Errorf("Accept text/html: %d %s", resp.StatusCode, body)
	}
	if f.fake.Started() != started {
		t.Error("a refused Accept ran the model")
	}
	if code, b := f.do(t, http.MethodGet, "/v1/budget", f.alice, "", ""); code != 200 || num(b["budget"].(map[string]any)["releases"]) != 5 {
		t.Errorf("GET /v1/budget: %d %v, want 5 releases", code, b)
	}
}

// stripPrivacy is the length of a safetensors body less its privacy metadata's.
func stripPrivacy(t *testing.T, body []byte) int {
	t.Helper()
	file, err := safetensors.Parse(body)
	if err != nil {
		t.Fatal(err)
	}
	return len(body) - len(file.Metadata["privacy"])
}
