package sweep

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/jsonfloat"
	"github.com/nvdp-project/nvdp/model"
	"github.com/nvdp-project/nvdp/train"
)

func TestFormatLambda(t *testing.T) {
	for _, c := range []struct {
		in   float64
		want string
	}{{1e-3, "1e-3"}, {1e-2, "1e-2"}, {0.1, "1e-1"}, {1, "1"}, {0, "0"}, {0.5, "5e-1"}, {2.5e-4, "2.5e-4"}, {10, "10"}, {1e-12, "1e-12"}} {
		if got := FormatLambda(c.in); got != c.want {
			t.Errorf("FormatLambda(%v) = %q, want %q", c.in, got, c.want)
		}
	}
}

func bound(v float64) *jsonfloat.Float { return jsonfloat.New(v) }

func TestSelectCMu(t *testing.T) {
	inf := math.Inf(1)
	cases := []struct {
		name      string
		cands     []CMuCandidate
		tol       float64
		want      float64
		tightest  float64
		eligible  []float64
		reasonHas string
		err       string
	}{
		{name: "smallest within tolerance",
			cands: []CMuCandidate{{CMu: 1, Utility: 0.80, RDMax: bound(0.1)}, {CMu: 2, Utility: 0.905, RDMax: bound(0.2)},
				{CMu: 4, Utility: 0.91, RDMax: bound(0.5)}, {CMu: 8, Utility: 0.90, RDMax: bound(0.9)}},
			tol: 0.01, want: 2, tightest: 2, eligible: []float64{2, 4, 8}, reasonHas: "also has the tightest"},
		{name: "input order irrelevant",
			cands: []CMuCandidate{{CMu: 8, Utility: 0.90, RDMax: bound(0.9)}, {CMu: 4, Utility: 0.91, RDMax: bound(0.5)},
				{CMu: 2, Utility: 0.905, RDMax: bound(0.2)}, {CMu: 1, Utility: 0.80, RDMax: bound(0.1)}},
			tol: 0.01, want: 2, tightest: 2, eligible: []float64{2, 4, 8}},
		{name: "tolerance zero: best only",
			cands: []CMuCandidate{{CMu: 1, Utility: 0.80}, {CMu: 2, Utility: 0.905}, {CMu: 4, Utility: 0.91}},
			tol:   0, want: 4, tightest: 4, eligible: []float64{4}},
		{name: "tolerance exactly a decimal difference counts",
			cands: []CMuCandidate{{CMu: 1, Utility: 0.89, RDMax: bound(1)}, {CMu: 2, Utility: 0.9, RDMax: bound(2)}},
			tol:   0.01, want: 1, tightest: 1, eligible: []float64{1, 2}},
		{name: "a larger eligible C_mu with a tighter audited bound is noted",
			cands: []CMuCandidate{{CMu: 2, Utility: 0.90, RDMax: bound(0.7)}, {CMu: 4, Utility: 0.905, RDMax: bound(0.3)}},
			tol:   0.01, want: 2, tightest: 4, eligible: []float64{2, 4}, reasonHas: "C_mu = 4 has a tighter audited worst case (rd_max 0.3 vs 0.7)"},
		{name: "rd ties broken by BDP",
			cands: []CMuCandidate{{CMu: 2, Utility: 0.9, RDMax: bound(0.5), BDPEpsilon: bound(11)}, {CMu: 3, Utility: 0.9, RDMax: bound(0.5), BDPEpsilon: bound(10)}},
			tol:   0.01, want: 2, tightest: 3, eligible: []float64{2, 3}},
		{name: "undefined bound is never the tightest",
			cands: []CMuCandidate{{CMu: 1, Utility: 0.9, RDMax: bound(inf), BDPEpsilon: bound(inf)}, {CMu: 2, Utility: 0.9, RDMax: bound(3)}},
			tol:   0.01, want: 1, tightest: 2, eligible: []float64{1, 2}, reasonHas: "rd_max 3 vs undefined"},
		{name: "a NaN bound is undefined",
			cands: []CMuCandidate{{CMu: 1, Utility: 0.9, RDMax: bound(math.NaN())}, {CMu: 2, Utility: 0.9, RDMax: bound(1e300)}},
			tol:   0.01, want: 1, tightest: 2, eligible: []float64{1, 2}, reasonHas: "rd_max 1e+300 vs undefined"},
		{name: "a BDP epsilon of NaN is never tighter than a defined one",
			cands: []CMuCandidate{{CMu: 2, Utility: 0.9, RDMax: bound(0.5), BDPEpsilon: bound(math.NaN())}, {CMu: 4, Utility: 0.9, RDMax: bound(0.5), BDPEpsilon: bound(12)}},
			tol:   0.01, want: 2, tightest: 4, eligible: []float64{2, 4}},
		{name: "a bound not audited is never the tightest",
			cands: []CMuCandidate{{CMu: 1, Utility: 0.9}, {CMu: 2, Utility: 0.9, RDMax: bound(inf)}, {CMu: 4, Utility: 0.9, RDMax: bound(7)}},
			tol:   0.01, want: 1, tightest: 4, eligible: []float64{1, 2, 4}, reasonHas: "C_mu 1 (0.9000, rd_max not audited), 2 (0.9000, rd_max undefined)"},
		{name: "empty", err: "no candidates"},
		{name: "NaN utility", cands: []CMuCandidate{{CMu: 1, Utility: math.NaN()}}, err: "NaN"},
		{name: "duplicate", cands: []CMuCandidate{{CMu: 1, Utility: 0.5}, {CMu: 1, Utility: 0.6}}, err: "duplicate C_mu 1"},
		{name: "negative tolerance", cands: []CMuCandidate{{CMu: 1, Utility: 0.5}}, tol: -1, err: "tolerance"},
		{name: "NaN tolerance", cands: []CMuCandidate{{CMu: 1, Utility: 0.5}}, tol: math.NaN(), err: "tolerance"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sel, err := SelectCMu(c.cands, c.tol)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if sel.CMu != c.want || sel.Tightest != c.tightest {
				t.Errorf("C_mu = %v, tightest %v; want %v, %v (%s)", sel.CMu, sel.Tightest, c.want, c.tightest, sel.Reason)
			}
			var elig []float64
			for _, cd := range sel.Candidates {
				if cd.Eligible {
					elig = append(elig, cd.CMu)
				}
			}
			if fmt.Sprint(elig) != fmt.Sprint(c.eligible) {
				t.Errorf("eligible %v, want %v", elig, c.eligible)
			}
			if !strings.Contains(sel.Reason, c.reasonHas) {
				t.Errorf("reason %q lacks %q", sel.Reason, c.reasonHas)
			}
			// The selection round-trips through JSON (c_mu_selection.json).
			b, err := json.Marshal(sel)
			if err != nil {
				t.Fatalf("selection does not marshal: %v", err)
			}
			var back CMuSelection
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			if b2, _ := json.Marshal(back); string(b2) != string(b) {
				t.Errorf("round trip:\n%s\n%s", b, b2)
			}
		})
	}
}

// TestCMuCandidateJSON: the bounds are written as numbers, "Infinity" and
// "NaN", and omitted when not computed; the null of the files written before
// package jsonfloat (every non-finite bound) reads as +Inf, never 0.
func TestCMuCandidateJSON(t *testing.T) {
	c := CMuCandidate{CMu: 2, Utility: 0.9, Seeds: 1, Eligible: true, RDMax: bound(math.Inf(1)), BDPEpsilon: bound(12.5)}
	b, err := json.Marshal(c)
	if want := `{"c_mu":2,"utility":0.9,"seeds":1,"eligible":true,"rd_max":"Infinity","bdp_epsilon":12.5}`; err != nil || string(b) != want {
		t.Errorf("marshal: %s, %v; want %s", b, err, want)
	}
	if b, _ := json.Marshal(CMuCandidate{CMu: 2}); string(b) != `{"c_mu":2,"utility":0,"seeds":0,"eligible":false}` {
		t.Errorf("not computed: %s", b)
	}
	for _, tc := range []struct {
		in      string
		rd, eps *float64 // nil: not computed
	}{
		{`{"c_mu":2,"rd_max":null,"bdp_epsilon":0.5}`, ptr(math.Inf(1)), ptr(0.5)}, // written before jsonfloat
		{`{"c_mu":2,"rd_max":"Infinity","bdp_epsilon":"NaN"}`, ptr(math.Inf(1)), ptr(math.NaN())},
		{`{"c_mu":2,"rd_max":0.25}`, ptr(0.25), nil},
		{`{"c_mu":2}`, nil, nil},
	} {
		var got CMuCandidate
		if err := json.Unmarshal([]byte(tc.in), &got); err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		if !sameBound(got.RDMax, tc.rd) || !sameBound(got.BDPEpsilon, tc.eps) || got.CMu != 2 {
			t.Errorf("%s: read %+v", tc.in, got)
		}
	}
	for _, in := range []string{`{"rd_max":"big"}`, `{"bdp_epsilon":true}`, `{"rd_max":1e999}`} {
		var got CMuCandidate
		if err := json.Unmarshal([]byte(in), &got); err == nil {
			t.Errorf("%s: no error", in)
		}
	}
}

func sameBound(f *jsonfloat.Float, want *float64) bool {
	if f == nil || want == nil {
		return f == nil && want == nil
	}
	return float64(*f) == *want || math.IsNaN(float64(*f)) && math.IsNaN(*want)
}

// TestSelectionReadsUndefinedBounds: a grid cell's bound that an older
// report.json holds as null is never 0 (which made such a C_mu the tightest):
// train.PrivacySummary's decoder reads an rd_max null without invalid pairs
// as undefined (NaN, no finite pair) and a bdp_epsilon null as not computed
// (no order estimable); both rank below every audited bound, and a cell
// without an audit is not audited.
func TestSelectionReadsUndefinedBounds(t *testing.T) {
	out := t.TempDir()
	privacyJSON := map[float64]string{
		1: `{"rd_max": 0.5, "bdp_epsilon": 12, "invalid_pairs": 0, "pairs": 12}`,
		2: `{"rd_max": 0.5, "bdp_epsilon": null, "invalid_pairs": 0, "pairs": 12}`,
		4: `{"rd_max": null, "bdp_epsilon": null, "invalid_pairs": 0, "pairs": 12}`,
		8: `null`,
	}
	runner := func(ctx context.Context, c Cell, po CellSpec) error {
		if err := os.MkdirAll(c.Dir, 0o755); err != nil {
			return err
		}
		rep := fmt.Sprintf(`{"task": %q, "variant": %q, "lambda": %v, "c_mu": %v, "seed": %d, "utility": {"accuracy": 0.9}, "privacy": %s}`,
			c.Task, c.Variant, po.Train.Lambda, po.Train.CMu, c.Seed, privacyJSON[po.Train.CMu])
		return os.WriteFile(filepath.Join(c.Dir, train.ReportFile), []byte(rep), 0o644)
	}
	o := Options{Base: bare(t, model.Options{}), Tasks: []string{"sst2"}, Variants: []string{"nvdp-clipped"}, Lambdas: []float64{1e-2}, Seeds: []uint64{1},
		Out: out, Runner: runner, CMuGrid: []float64{1, 2, 4, 8}, CMuTolerance: ptr(0.0)}
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	sel := res.Manifest.Selections["sst2"]
	if sel.CMu != 1 || sel.Tightest != 1 {
		t.Errorf("C_mu %v, tightest %v; want 1, 1 (%s)", sel.CMu, sel.Tightest, sel.Reason)
	}
	want := map[float64][2]string{1: {"0.5", "12"}, 2: {"0.5", "nil"}, 4: {"NaN", "nil"}, 8: {"nil", "nil"}}
	for _, c := range sel.Candidates {
		if got := [2]string{fmtValue(c.RDMax), fmtValue(c.BDPEpsilon)}; got != want[c.CMu] {
			t.Errorf("C_mu %v: rd_max, bdp_epsilon %v, want %v", c.CMu, got, want[c.CMu])
		}
	}
	if !strings.Contains(sel.Reason, "8 (0.9000, rd_max not audited)") || !strings.Contains(sel.Reason, "4 (0.9000, rd_max undefined)") {
		t.Errorf("reason %q", sel.Reason)
	}
}

func fmtValue(f *jsonfloat.Float) string {
	if f == nil {
		return "nil"
	}
	return fmt.Sprint(float64(*f))
}
