package train

import (
	"bytes"
	"math"
	"strconv"
	"testing"

	"github.com/nvdp-project/nvdp/internal/texttest"
	"github.com/nvdp-project/nvdp/jsonfloat"
	"github.com/nvdp-project/nvdp/privacy"
)

// mainJobClip is the main job's clip set: N 129, P 128, C_mu 2, prior
// N(0, 1), margin 0.6931 at clip order 1.1, alpha in [0.3, 1].
func mainJobClip() privacy.ClipSet {
	return privacy.ClipSet{Components: 129, Dims: 128, CMu: 2, PriorMu: []float64{0}, PriorVar: []float64{1},
		ClipOrder: 1.1, LogvarMargin: 0.6931, AlphaMin: 0.3, AlphaMax: 1, PriorAlpha: 1}
}

// TestReportWriteTextLabels: the `nvdp run` summary labels the audit numbers
// empirical and the BDP an estimate, and prints the certified guarantee of
// report.json beside them: the RD at the audit order, epsilon at delta with
// its order and the certified BDP, or "none: unclipped" with the reason.
func TestReportWriteTextLabels(t *testing.T) {
	clipped, err := privacy.NewCertifiedReport(mainJobClip(), privacy.ReportOptions{Order: 1.1, Releases: 1, Delta: privacy.DefaultDelta, Source: "test"})
	if err != nil {
		t.Fatal(err)
	}
	open := mainJobClip()
	open.CMu, open.AlphaMax = math.Inf(1), math.Inf(1)
	open.LogvarFloor, open.LogvarCap = []float64{math.Inf(-1)}, []float64{math.Inf(1)}
	unclipped, err := privacy.NewCertifiedReport(open, privacy.ReportOptions{Order: 1.1, Releases: 1, Delta: privacy.DefaultDelta, Source: "test"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		cert   *privacy.CertifiedReport
		want   []string
		absent []string
	}{
		{"clipped", clipped, []string{"certified RD (every pair of inputs), order 1.1", "46450.355726  (variance ",
			"certified ε (delta 1e-05)", "RDP at order " + strconv.FormatFloat(float64(clipped.BestOrder), 'g', 6, 64),
			"certified BDP ε_μ (delta 1e-05)", privacy.CertifiedBDPNote, clipped.Scope}, []string{"none"}},
		{"unclipped", unclipped, []string{"certified guarantee (every pair of inputs)", "none: unclipped (" + unclipped.Reason + ")"},
			[]string{"certified RD", "certified ε"}},
		{"no certified block", nil, []string{"certified guarantee", "none in report.json"}, []string{"certified RD"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Report{Task: "sst2", Variant: "nvdp-clipped", Mode: "principled", Dir: t.TempDir(), UtilitySplit: "dev",
				Privacy: &PrivacySummary{Mode: privacy.ModePrincipled, Order: 1.1, Delta: 1e-5, RDMax: 12.5, RDMean: jsonfloat.New(3.25),
					BDPEpsilon: jsonfloat.New(0.5), Pairs: 132, Examples: 12, Components: 129, Split: "dev", Certified: tc.cert}}
			var b bytes.Buffer
			if err := r.WriteText(&b); err != nil {
				t.Fatal(err)
			}
			texttest.Contains(t, b.String(), append([]string{"RD max over dev pairs (empirical, not a guarantee)", "12.500000",
				"RD mean (empirical)", "BDP ε_μ (estimate), delta 1e-05"}, tc.want...), tc.absent)
		})
	}
}

// TestReportWriteTextBaseline: the summary prints the non-private baseline of
// report.json with its source, spread and the run's difference in points.
func TestReportWriteTextBaseline(t *testing.T) {
	for _, tc := range []struct {
		name string
		base *BaselineComparison
		want []string
	}{
		{"stored", &BaselineComparison{Source: "stored", Path: "b.json", Metric: "accuracy", Values: []float64{0.808, 0.817, 0.813}, Mean: 0.8127, SD: 0.0045},
			[]string{"non-private baseline dev accuracy (stored: b.json)", "0.8127 ± 0.0045 over 3 seeds; this run -5.3 points"}},
		{"run", &BaselineComparison{Source: "run", Path: "r/report.json", Metric: "accuracy", Values: []float64{0.80}, Mean: 0.80},
			[]string{"non-private baseline dev accuracy (run: r/report.json)", "0.8000; this run -4.0 points"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Report{Task: "sst2", Variant: "nvdp-clipped", Mode: "principled", Dir: t.TempDir(), UtilitySplit: "dev",
				Utility: Metrics{"accuracy": 0.76}, Baseline: tc.base}
			var b bytes.Buffer
			if err := r.WriteText(&b); err != nil {
				t.Fatal(err)
			}
			texttest.Contains(t, b.String(), tc.want, nil)
		})
	}
}
