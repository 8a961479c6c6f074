package main

import (
	"bytes"
	"math"
	"strconv"
	"testing"

	"github.com/nvdp-project/nvdp/jsonfloat"
	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/train"
)

// TestRunSummaryLabels: the `nvdp run` summary labels the audit numbers
// empirical and the BDP an estimate, and prints the certified guarantee of
// report.json beside them: the RD at the audit order, epsilon at delta with
// its order and the certified BDP, or "none: unclipped" with the reason.
func TestRunSummaryLabels(t *testing.T) {
	clipped, err := privacy.NewCertifiedReport(mainJobClip(129, 128), privacy.ReportOptions{Order: 1.1, Releases: 1, Delta: privacy.DefaultDelta, Source: "test"})
	if err != nil {
		t.Fatal(err)
	}
	open := mainJobClip(129, 128)
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
			r := &train.Report{Task: "sst2", Variant: "nvdp-clipped", Mode: "principled", Dir: t.TempDir(), UtilitySplit: "dev",
				Privacy: &train.PrivacySummary{Mode: privacy.ModePrincipled, Order: 1.1, Delta: 1e-5, RDMax: 12.5, RDMean: jsonfloat.New(3.25),
					BDPEpsilon: jsonfloat.New(0.5), Pairs: 132, Examples: 12, Components: 129, Split: "dev", Certified: tc.cert}}
			var b bytes.Buffer
			printRunReport(&b, r)
			checkOutput(t, b.String(), append([]string{"RD max over dev pairs (empirical, not a guarantee)", "12.500000",
				"RD mean (empirical)", "BDP ε_μ (estimate), delta 1e-05"}, tc.want...), tc.absent)
		})
	}
}

// TestRunSummaryBaseline: the summary prints the non-private baseline of
// report.json with its source, spread and the run's difference in points.
func TestRunSummaryBaseline(t *testing.T) {
	for _, tc := range []struct {
		name string
		base *train.BaselineComparison
		want []string
	}{
		{"stored", &train.BaselineComparison{Source: "stored", Path: "b.json", Metric: "accuracy", Values: []float64{0.808, 0.817, 0.813}, Mean: 0.8127, SD: 0.0045},
			[]string{"non-private baseline dev accuracy (stored: b.json)", "0.8127 ± 0.0045 over 3 seeds; this run -5.3 points"}},
		{"run", &train.BaselineComparison{Source: "run", Path: "r/report.json", Metric: "accuracy", Values: []float64{0.80}, Mean: 0.80},
			[]string{"non-private baseline dev accuracy (run: r/report.json)", "0.8000; this run -4.0 points"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &train.Report{Task: "sst2", Variant: "nvdp-clipped", Mode: "principled", Dir: t.TempDir(), UtilitySplit: "dev",
				Utility: train.Metrics{"accuracy": 0.76}, Baseline: tc.base}
			var b bytes.Buffer
			printRunReport(&b, r)
			checkOutput(t, b.String(), tc.want, nil)
		})
	}
}
