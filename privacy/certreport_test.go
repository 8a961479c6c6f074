package privacy

import (
	"encoding/json"
	"errors"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/jsonfloat"
	"github.com/nvdp-project/nvdp/option"
)

// TestNewCertifiedReportMainJob: the report of the main job's constants (N 129,
// P 128, order 1.1, C_mu 2, prior N(0, 1), margin 0.6931 at clip order 1.1,
// alpha in [0.3, 1], prior alpha 1) carries the library's certificate,
// 46450.36 nats, its curve over DefaultOrders, the best (epsilon, delta)
// and BDP conversions of that curve, and its labels.
func TestNewCertifiedReportMainJob(t *testing.T) {
	set := mainJobSet()
	r, err := NewCertifiedReport(set, ReportOptions{Order: 1.1, Releases: 1, Delta: DefaultDelta, Source: "test constants"})
	if err != nil {
		t.Fatal(err)
	}
	if relErr(float64(r.RD), 46450.35572603645) > 1e-9 {
		t.Errorf("rd_certified %.15g, want 46450.35572603645", float64(r.RD))
	}
	if sum := float64(r.Parts.Variance + r.Parts.Mean + r.Parts.Dirichlet); relErr(sum, float64(r.RD)) > 1e-12 {
		t.Errorf("parts sum %v, rd %v", sum, r.RD)
	}
	if r.Label != LabelCertified || r.Scope != CertifiedScope(1, 129, 128) || r.Source != "test constants" ||
		r.Components != 129 || r.Dims != 128 || r.Order != 1.1 || r.Direction != DirectionStandard || !r.Finite || r.Reason != "" ||
		r.Releases != 1 || r.Delta != DefaultDelta || r.BDPNote != CertifiedBDPNote || r.Constants["clip_mu"] != "2" ||
		len(r.Curve) != len(DefaultOrders) || r.PerRelease == nil || r.PerRelease.RD != r.RD || r.Unbounded() {
		t.Fatalf("report %+v", r)
	}
	for _, w := range []string{"one release", "N = 129 components, P = 128 dims", "not the training data"} {
		if !strings.Contains(r.Scope, w) {
			t.Errorf("scope %q lacks %q", r.Scope, w)
		}
	}
	eps, best, err := BestEpsilon(r.Curve, DefaultDelta)
	if err != nil || jsonfloat.Float(eps) != r.Epsilon || jsonfloat.Float(best) != r.BestOrder {
		t.Errorf("epsilon %v at %v; curve gives %v at %v (%v)", r.Epsilon, r.BestOrder, eps, best, err)
	}
	bdp, l, err := CertifiedBDP(r.Curve, DefaultDelta)
	if err != nil || jsonfloat.Float(bdp) != r.BDPEpsilon || jsonfloat.Float(l) != r.BDPOrder {
		t.Errorf("bdp %v at %v; curve gives %v at %v (%v)", r.BDPEpsilon, r.BDPOrder, bdp, l, err)
	}
	for _, p := range r.Curve {
		if p.Order == 1.1 && p.RD != r.RD {
			t.Errorf("curve at 1.1: %v, rd_certified %v", p.RD, r.RD)
		}
	}
}

// TestNewCertifiedReportReleases: k releases multiply the certificate, its parts
// and every point of the curve by k, and the scope says k releases.
func TestNewCertifiedReportReleases(t *testing.T) {
	set := mainJobSet()
	orders := []float64{1.05, 1.1, 1.2, 2}
	one, err := NewCertifiedReport(set, ReportOptions{Order: 1.1, Direction: DirectionStandard, Releases: 1, Delta: DefaultDelta, Orders: orders, Source: "one"})
	if err != nil {
		t.Fatal(err)
	}
	three, err := NewCertifiedReport(set, ReportOptions{Order: 1.1, Direction: DirectionStandard, Releases: 3, Delta: DefaultDelta, Orders: orders, Source: "three"})
	if err != nil {
		t.Fatal(err)
	}
	close3 := func(name string, got, want jsonfloat.Float) {
		t.Helper()
		if math.IsInf(float64(want), 1) && math.IsInf(float64(got), 1) {
			return
		}
		if relErr(float64(got), 3*float64(want)) > 1e-12 {
			t.Errorf("%s: 3 releases %v, one release %v", name, got, want)
		}
	}
	close3("rd_certified", three.RD, one.RD)
	close3("variance", three.Parts.Variance, one.Parts.Variance)
	close3("mean", three.Parts.Mean, one.Parts.Mean)
	close3("dirichlet", three.Parts.Dirichlet, one.Parts.Dirichlet)
	if len(three.Curve) != len(orders) || len(one.Curve) != len(orders) {
		t.Fatalf("curves of %d and %d points, want %d", len(one.Curve), len(three.Curve), len(orders))
	}
	for i := range orders {
		if three.Curve[i].Order != orders[i] {
			t.Errorf("point %d: order %v, want %v", i, three.Curve[i].Order, orders[i])
		}
		close3("curve", three.Curve[i].RD, one.Curve[i].RD)
	}
	if three.PerRelease.RD != one.RD || three.Releases != 3 || !strings.Contains(three.Scope, "3 releases") {
		t.Errorf("per release %v (one release %v), releases %d, scope %q", three.PerRelease.RD, one.RD, three.Releases, three.Scope)
	}
	if !(three.Epsilon > one.Epsilon) {
		t.Errorf("epsilon of 3 releases %v not above one release %v", three.Epsilon, one.Epsilon)
	}
}

// TestNewCertifiedReportJSON: +Inf is "Infinity" and an undefined order "NaN"
// in JSON (jsonfloat) and read back as such (an unclipped set), finite
// values round-trip exactly, and the keys are the ones report.json has
// always had.
func TestNewCertifiedReportJSON(t *testing.T) {
	unclipped := mainJobSet()
	unclipped.CMu, unclipped.AlphaMax = math.Inf(1), math.Inf(1)
	unclipped.LogvarFloor, unclipped.LogvarCap = []float64{math.Inf(-1)}, []float64{math.Inf(1)}
	for _, tc := range []struct {
		name   string
		set    ClipSet
		finite bool
	}{{"main job", mainJobSet(), true}, {"unclipped", unclipped, false}} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := NewCertifiedReport(tc.set, ReportOptions{Order: 1.1, Releases: 1, Delta: DefaultDelta, Source: "test"})
			if err != nil {
				t.Fatal(err)
			}
			if r.Finite != tc.finite || r.Unbounded() == tc.finite || (!tc.finite && r.Reason == "") {
				t.Fatalf("finite %v unbounded %v reason %q", r.Finite, r.Unbounded(), r.Reason)
			}
			b, err := json.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			var raw map[string]any
			if err := json.Unmarshal(b, &raw); err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{"label", "scope", "source", "constants", "components", "dims", "order", "gaussian_direction",
				"rd_certified", "parts", "finite", "max_order", "releases", "delta", "epsilon", "best_order",
				"bdp_epsilon_certified", "bdp_order_certified", "bdp_note", "orders"} {
				if _, ok := raw[k]; !ok {
					t.Errorf("JSON lacks %q", k)
				}
			}
			// Exactly these keys (the report's own, its certificate's and its
			// guarantee's, each once; not the guarantee's format).
			keys := []string{"accountant", "bdp_epsilon_certified", "bdp_note", "bdp_order_certified", "best_order", "components", "constants",
				"delta", "dims", "epsilon", "finite", "gaussian_direction", "label", "max_order", "order", "orders", "parts", "rd_certified",
				"rdp_epsilon", "release", "releases", "scope", "source"}
			if !tc.finite {
				keys = append(keys, "reason")
			}
			if got := slices.Sorted(maps.Keys(raw)); !slices.Equal(got, slices.Sorted(slices.Values(keys))) {
				t.Errorf("JSON keys %v, want %v", got, keys)
			}
			if _, ok := raw["reason"]; ok == tc.finite {
				t.Errorf("reason present %v, finite %v", ok, tc.finite)
			}
			if !tc.finite {
				for k, want := range map[string]string{"rd_certified": "Infinity", "epsilon": "Infinity", "bdp_epsilon_certified": "Infinity",
					"best_order": "NaN", "bdp_order_certified": "NaN"} {
					if raw[k] != want {
						t.Errorf("%s = %v, want %q", k, raw[k], want)
					}
				}
				if p := raw["orders"].([]any)[0].(map[string]any); p["rd"] != "Infinity" {
					t.Errorf("curve rd %v, want \"Infinity\"", p["rd"])
				}
			}
			var back CertifiedReport
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			same := func(a, b jsonfloat.Float) bool {
				return a == b || math.IsNaN(float64(a)) && math.IsNaN(float64(b))
			}
			if !same(back.RD, r.RD) || !same(back.Epsilon, r.Epsilon) || !same(back.BDPEpsilon, r.BDPEpsilon) ||
				!same(back.MaxOrder, r.MaxOrder) || back.Direction != r.Direction || !same(back.BestOrder, r.BestOrder) || !same(back.BDPOrder, r.BDPOrder) ||
				back.Parts != r.Parts || back.Finite != r.Finite || back.Reason != r.Reason || back.Scope != r.Scope ||
				back.Constants["clip_mu"] != r.Constants["clip_mu"] || back.PerRelease != nil || len(back.Curve) != len(r.Curve) {
				t.Fatalf("round trip:\n got %+v\nwant %+v", back, *r)
			}
			for i := range r.Curve {
				if back.Curve[i] != r.Curve[i] {
					t.Errorf("curve point %d: %+v, want %+v", i, back.Curve[i], r.Curve[i])
				}
			}
			if !tc.finite && !math.IsInf(float64(back.RD), 1) {
				t.Errorf("rd_certified read back as %v, want +Inf", back.RD)
			}
			// A file written before jsonfloat has null for every non-finite
			// number: bounds read as +Inf, orders as NaN.
			old := strings.NewReplacer(`"Infinity"`, "null", `"NaN"`, "null").Replace(string(b))
			var legacy CertifiedReport
			if err := json.Unmarshal([]byte(old), &legacy); err != nil {
				t.Fatal(err)
			}
			if !same(legacy.RD, r.RD) || !same(legacy.Epsilon, r.Epsilon) || !same(legacy.BDPEpsilon, r.BDPEpsilon) ||
				!same(legacy.BestOrder, r.BestOrder) || !same(legacy.BDPOrder, r.BDPOrder) || !same(legacy.Curve[0].RD, r.Curve[0].RD) {
				t.Errorf("legacy nulls read as %+v, want %+v", legacy, *r)
			}
		})
	}
}

func TestCertifiedScope(t *testing.T) {
	for _, tc := range []struct {
		releases, n, p int
		want           string
	}{
		{1, 129, 128, "one release of the embedding of one input (a text, an utterance) vs any other input (every pair of inputs; N = 129 components, P = 128 dims); not the training data"},
		{3, 17, 8, "3 releases of the embedding of one input (a text, an utterance) vs any other input (every pair of inputs; N = 17 components, P = 8 dims); not the training data"},
		{1, 0, 0, "one release of the embedding of one input (a text, an utterance) vs any other input (every pair of inputs); not the training data"},
	} {
		if got := CertifiedScope(tc.releases, tc.n, tc.p); got != tc.want {
			t.Errorf("CertifiedScope(%d, %d, %d) = %q, want %q", tc.releases, tc.n, tc.p, got, tc.want)
		}
	}
}

// TestNewCertifiedReportErrors: errors name the source and the bad value.
func TestNewCertifiedReportErrors(t *testing.T) {
	bad := mainJobSet()
	bad.Dims = 0
	for _, tc := range []struct {
		set      ClipSet
		order    float64
		releases int
		delta    float64
		want     string
	}{
		{mainJobSet(), 1, 1, DefaultDelta, "order"},
		{mainJobSet(), 1.1, 0, DefaultDelta, "releases 0: must be >= 1"},
		{mainJobSet(), 1.1, 1, 1, "delta 1: must be in (0, 1)"},
		{bad, 1.1, 1, DefaultDelta, "P must be >= 1"},
	} {
		_, err := NewCertifiedReport(tc.set, ReportOptions{Order: tc.order, Releases: tc.releases, Delta: tc.delta, Source: "the source"})
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "certify (the source)") {
			t.Errorf("order %v releases %d delta %v: error %v, want %q", tc.order, tc.releases, tc.delta, err, tc.want)
		}
	}
}

// TestReportOptionsValidate: each bad option of NewCertifiedReport is an *option.Error
// naming it (a program's flag for it), checked before any work.
func TestReportOptionsValidate(t *testing.T) {
	for _, c := range []struct {
		order    float64
		orders   []float64
		dir      GaussianDirection
		releases int
		delta    float64
		option   string
	}{
		{1, nil, "", 1, DefaultDelta, "order"},
		{math.NaN(), nil, "", 1, DefaultDelta, "order"},
		{math.Inf(1), nil, "", 1, DefaultDelta, "order"},
		{1.1, []float64{2, 1}, "", 1, DefaultDelta, "orders"},
		{1.1, nil, "forward", 1, DefaultDelta, "gaussian_direction"},
		{1.1, nil, DirectionPaper, 0, DefaultDelta, "releases"},
		{1.1, nil, DirectionStandard, 1, 0, "delta"},
		{1.1, nil, DirectionStandard, 1, 1, "delta"},
		{1.1, []float64{1.5, 2}, "", 3, DefaultDelta, ""},
	} {
		err := ReportOptions{Order: c.order, Orders: c.orders, Direction: c.dir, Releases: c.releases, Delta: c.delta}.Validate()
		var oe *option.Error
		if c.option == "" {
			if err != nil {
				t.Errorf("%+v: %v", c, err)
			}
		} else if !errors.As(err, &oe) || oe.Option != c.option {
			t.Errorf("%+v: %v, want an option error of %s", c, err, c.option)
		}
	}
}
