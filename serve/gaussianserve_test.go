package serve_test

import (
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/serve"
	"github.com/nvdp-project/nvdp/serve/servetest"
)

// TestBudgetGaussian: a server whose model's release is exactly Gaussian
// (servetest.Fake with Mu) composes the key's releases exactly, and says
// so: GET /v1/budget's balance has accountant analytic-gaussian, spent
// epsilon privacy.GaussianMechanismEpsilon(mu sqrt(k)), remaining releases
// by the closed form; its history's curve has accountant gaussian-mu, its
// mu and the exact epsilon of one release; the 429 of an exhausted budget
// carries the same accountant. Every exchange is checked against the
// OpenAPI document (servetest.Do).
func TestBudgetGaussian(t *testing.T) {
	const mu, budget = 0.2, 4.0
	fake := &servetest.Fake{N: 3, P: 4, Mu: mu}
	o := serve.DefaultOptions()
	o.BudgetEpsilon = budget
	srv, err := serve.New(fake, servetest.OpenLedger(t), nil, o, nil)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	eps := func(k float64) float64 {
		e, err := privacy.GaussianMechanismEpsilon(mu*math.Sqrt(k), privacy.DefaultDelta)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	muB, _ := privacy.GaussianMechanismMu(budget, privacy.DefaultDelta)
	fit := math.Floor(muB * muB / (mu * mu)) // releases the budget holds
	code, body := servetest.Do(t, http.MethodGet, ts.URL+"/v1/budget", "", "", "")
	if b, _ := body["budget"].(map[string]any); code != 200 || b["accountant"] != privacy.AccountantGaussian || num(b["remaining_releases"]) != fit {
		t.Fatalf("fresh balance: %d %v, want %v releases by %s", code, body, fit, privacy.AccountantGaussian)
	}
	if code, body := servetest.Do(t, http.MethodPost, ts.URL+"/v1/embed", "", "application/json", `{"texts": ["a", "b", "c"]}`); code != 200 ||
		num(body["privacy"].(map[string]any)["spent_epsilon"]) != eps(3) {
		t.Fatalf("embed: %d %v, want spent %v", code, body, eps(3))
	}
	code, body = servetest.Do(t, http.MethodGet, ts.URL+"/v1/budget?history=1", "", "", "")
	b, _ := body["budget"].(map[string]any)
	if code != 200 || b["accountant"] != privacy.AccountantGaussian || num(b["spent_epsilon"]) != eps(3) || num(b["remaining_releases"]) != fit-3 {
		t.Fatalf("balance after 3: %d %v, want spent %v and %v remaining", code, body, eps(3), fit-3)
	}
	h := body["history"].(map[string]any)
	ch := h["charges"].([]any)[0].(map[string]any)
	curve := h["curves"].(map[string]any)[ch["curve"].(string)].(map[string]any)
	if curve["accountant"] != privacy.AccountantGaussian || num(curve["gaussian_mu"]) != mu || num(curve["epsilon_per_release"]) != eps(1) || curve["order"] != "NaN" {
		t.Errorf("history's curve %v", curve)
	}
	texts := `{"texts": ["x"` + strings.Repeat(`, "x"`, int(fit)-3) + `]}` // one more than remains
	code, body = servetest.Do(t, http.MethodPost, ts.URL+"/v1/embed", "", "application/json", texts)
	e, _ := body["error"].(map[string]any)
	if code != 429 || e["code"] != "budget_exceeded" || e["budget"].(map[string]any)["accountant"] != privacy.AccountantGaussian {
		t.Fatalf("past the budget: %d %v", code, body)
	}
	texts = `{"texts": ["x"` + strings.Repeat(`, "x"`, int(fit)-4) + `]}`
	if code, body := servetest.Do(t, http.MethodPost, ts.URL+"/v1/embed", "", "application/json", texts); code != 200 ||
		num(body["privacy"].(map[string]any)["spent_epsilon"]) != eps(fit) || num(body["privacy"].(map[string]any)["remaining_releases"]) != 0 {
		t.Fatalf("the last %v releases: %d %v", fit-3, code, body)
	}
	if code, body := servetest.Do(t, http.MethodGet, ts.URL+"/v1/info", "", "", ""); code != 200 ||
		!strings.Contains(body["accounting"].(map[string]any)["composition"].(string), "composes exactly") {
		t.Errorf("info: %d %v", code, body)
	}
	t.Logf("budget %v holds %v releases of mu %v exactly (eps %v; one more: %v)", budget, fit, mu, eps(fit), eps(fit+1))
}
