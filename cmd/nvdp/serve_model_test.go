package main

import (
	"context"
	"encoding/json"
	"math"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/release"
	"github.com/nvdp-project/nvdp/serve"
	"github.com/nvdp-project/nvdp/serve/servetest"
)

// TestServeTrainedModel: the service on a model trained by the pipeline
// (release.Load behind serve.FromRelease, crypto-seeded noise): /v1/embed
// returns one release of shape [N x P] and [N] per text, /v1/info the
// model's certified guarantee (the release package's, which equals `nvdp
// certify --model`), the ledger charges the releases, and the spent epsilon
// is the certified epsilon of that many releases composed; two releases of
// the same text differ (fresh noise per call).
func TestServeTrainedModel(t *testing.T) {
	glueDir, vocab := synthSST2(t, 24)
	dir := tinyModel(t, glueDir, vocab, nvib.ModelNVDPClipped)
	r, err := release.Load(dir, release.Options{})
	if err != nil {
		t.Fatal(err)
	}
	n, p := r.Shape()
	ledger := servetest.OpenLedger(t)
	o := serve.DefaultOptions()
	o.BudgetEpsilon, o.MaxEpsilon = 1e6, math.Inf(1) // the tiny hand-set model certifies epsilon 2090
	src, err := release.NewSource()
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	srv, err := serve.New(serve.FromRelease(r, src), ledger, nil, o, nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	base := "http://" + ln.Addr().String()

	body := `{"texts": ["a gripping, funny film", "dull", "a gripping, funny film"]}`
	code, resp := servetest.Do(t, http.MethodPost, base+"/v1/embed", "", "application/json", body)
	if code != http.StatusOK {
		t.Fatalf("embed: %d %v", code, resp)
	}
	var got struct {
		Embeddings [][][]float64 `json:"embeddings"`
		Weights    [][]float64   `json:"weights"`
		Privacy    struct {
			RD      float64 `json:"rd_certified"`
			Order   float64 `json:"order"`
			Epsilon float64 `json:"epsilon"`
			Spent   float64 `json:"spent_epsilon"`
			Release struct {
				Exact      bool    `json:"exact"`
				Lattice    float64 `json:"lattice"`
				LatticeExp int     `json:"lattice_exp"`
			} `json:"release"`
		} `json:"privacy"`
	}
	b, _ := json.Marshal(resp)
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Embeddings) != 3 || len(got.Weights) != 3 {
		t.Fatalf("%d embeddings, %d weights, want 3", len(got.Embeddings), len(got.Weights))
	}
	for i := range got.Embeddings {
		if len(got.Embeddings[i]) != n || len(got.Embeddings[i][0]) != p || len(got.Weights[i]) != n {
			t.Fatalf("release %d has shape [%d x %d] and [%d], want [%d x %d] and [%d]",
				i, len(got.Embeddings[i]), len(got.Embeddings[i][0]), len(got.Weights[i]), n, p, n)
		}
		sum := 0.0
		for _, w := range got.Weights[i] {
			sum += w
		}
		if math.Abs(sum-1) > 1e-4 {
			t.Errorf("release %d: weights sum to %v", i, sum)
		}
	}
	if got.Embeddings[0][1][0] == got.Embeddings[2][1][0] {
		t.Error("two releases of the same text drew the same noise")
	}
	// the service's releases are exact: every value, a float32 written in its shortest form (read back
	// as float32, it is the value released), on the lattice
	if rel := got.Privacy.Release; !rel.Exact || rel.Lattice != math.Ldexp(1, rel.LatticeExp) || rel.LatticeExp >= 0 {
		t.Fatalf("privacy.release %+v, want exact with its lattice", rel)
	}
	for i, e := range got.Embeddings {
		for _, row := range e {
			for _, v := range row {
				if q := float64(float32(v)) / got.Privacy.Release.Lattice; q != math.Trunc(q) {
					t.Fatalf("release %d: value %v is not a float32 on the lattice 2^%d", i, v, got.Privacy.Release.LatticeExp)
				}
			}
		}
	}
	g := r.Guarantee()
	three, err := r.GuaranteeOf(3)
	if err != nil {
		t.Fatal(err)
	}
	eps1, eps3 := float64(g.Epsilon), float64(three.Epsilon)
	if math.Abs(got.Privacy.Epsilon-eps1) > 1e-9*eps1 || math.Abs(got.Privacy.Spent-eps3) > 1e-9*eps3 {
		t.Errorf("privacy %+v: want the release's epsilon %v and spent %v (3 releases composed)", got.Privacy, g.Epsilon, three.Epsilon)
	}
	if g.Label != "certified" {
		t.Errorf("guarantee label %q", g.Label)
	}
	code, info := servetest.Do(t, http.MethodGet, base+"/v1/info", "", "", "")
	if code != http.StatusOK || info["guarantee"] == nil {
		t.Fatalf("info: %d %v", code, info)
	}
	// /v1/info answers without a key: it names the model, not where it lies.
	if raw, _ := json.Marshal(info); strings.Contains(string(raw), filepath.Dir(dir)) || info["model"].(map[string]any)["dir"] != filepath.Base(dir) {
		t.Errorf("/v1/info shows the model's path: %s", raw)
	}
	// the ledger holds the three releases
	accts, err := ledger.Accounts()
	if err != nil {
		t.Fatal(err)
	}
	var releases uint64
	for _, a := range accts {
		releases += a.Releases
	}
	if releases != 3 {
		t.Errorf("ledger charged %d releases, want 3", releases)
	}
}
