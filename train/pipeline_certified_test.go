package train

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/audit"
	"github.com/nvdp-project/nvdp/jsonfloat"
	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/privacy"
)

// TestCertifyMainJobConstants: the certified block of the main job's clip
// constants (N 129, P 128, order 1.1, C_mu 2, margin 0.6931, C_amin 0.3,
// C_amax 1, prior N(0, 1), prior alpha 1) is the library's certificate,
// 46450.36 nats, with its guarantee and labels.
func TestCertifyMainJobConstants(t *testing.T) {
	clip := nvib.ClipConfig{Enabled: true, CMu: 2, CAlphaMin: 0.3, CAlphaMax: 1, Order: 1.1, LogvarMargin: 0.6931, CapSigma: true}
	cfg := nvib.Config{Model: nvib.ModelNVDPClipped, Hidden: 128, Prior: nvib.DefaultPrior(), Clip: clip}
	for _, tc := range []struct {
		name   string
		cfg    nvib.Config
		ok     bool
		finite bool
		rd     float64 // 0: not checked
	}{
		{"main job", cfg, true, true, 46450.36},
		{"unclipped nvdp", func() nvib.Config { c := cfg; c.Model = nvib.ModelNVDP; return c }(), true, false, 0},
		{"reference clipping (no sigma cap)", func() nvib.Config {
			c := cfg
			c.Clip = nvib.DefaultClip(privacy.ModeReference, 2, 1)
			return c
		}(), true, false, 0},
		{"baseline", nvib.Config{Model: nvib.ModelBaseline}, false, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set, ok := tc.cfg.ClipSet(129)
			if ok != tc.ok {
				t.Fatalf("Config.ClipSet ok = %v, want %v", ok, tc.ok)
			}
			if !ok {
				return
			}
			c, err := privacy.NewCertifiedReport(set, privacy.ReportOptions{Order: 1.1, Releases: 1, Delta: 1e-5, Source: "test"})
			if err != nil {
				t.Fatal(err)
			}
			want, err := privacy.Certify(set, 1.1, privacy.DirectionStandard)
			if err != nil {
				t.Fatal(err)
			}
			if c.Label != privacy.LabelCertified || c.Scope != privacy.CertifiedScope(1, 129, 128) || c.Finite != tc.finite || c.Components != 129 || c.Dims != 128 ||
				len(c.Curve) != len(privacy.DefaultOrders) || c.Releases != 1 || c.Delta != 1e-5 || c.Direction != privacy.DirectionStandard {
				t.Fatalf("certified block %+v", c)
			}
			if float64(c.RD) != float64(want.RD) && !(math.IsInf(float64(c.RD), 1) && math.IsInf(float64(want.RD), 1)) {
				t.Errorf("rd_certified %v, library %v", c.RD, want.RD)
			}
			if tc.rd != 0 && math.Abs(float64(c.RD)-tc.rd) > 0.01 {
				t.Errorf("rd_certified %.4f, want %.2f", float64(c.RD), tc.rd)
			}
			if !tc.finite {
				if c.Reason == "" || !math.IsInf(float64(c.RD), 1) {
					t.Errorf("unbounded set: rd %v reason %q, want +Inf with a reason", c.RD, c.Reason)
				}
				return
			}
			if sum := float64(c.Parts.Variance + c.Parts.Mean + c.Parts.Dirichlet); math.Abs(sum-float64(c.RD)) > 1e-6*float64(c.RD) {
				t.Errorf("parts sum %v, rd %v", sum, c.RD)
			}
			if !(float64(c.Epsilon) > 0 && float64(c.BDPEpsilon) > 0 && float64(c.BestOrder) > 1) {
				t.Errorf("guarantee eps %v at %v, bdp %v", c.Epsilon, c.BestOrder, c.BDPEpsilon)
			}
		})
	}
}

// metadataCertificate is the clip set of a posterior file's metadata and
// shape (what `nvdp audit` certifies) and its certificate at order.
func metadataCertificate(t *testing.T, post *privacy.Posteriors, order float64) (privacy.ClipSet, *privacy.Certificate) {
	t.Helper()
	set, ok, err := privacy.ClipSetFromMetadata(post)
	if err != nil || !ok {
		t.Fatalf("posterior metadata clip set: ok %v err %v", ok, err)
	}
	c, err := privacy.Certify(set, order, privacy.DirectionStandard)
	if err != nil {
		t.Fatal(err)
	}
	return set, c
}

// TestPipelineReportCertified: report.json of a tiny `nvdp run` carries the
// certified block beside the empirical audit: rd_certified is privacy.Certify
// of the model's clip set (and of the clip set in the posterior file's
// metadata), it bounds the audited rd_max, and the audit numbers are labelled
// empirical. An unclipped model certifies +Inf with a reason. eval_dev.json
// carries the certified block at the clip's order. The sweep's reader still
// reads the report.
func TestPipelineReportCertified(t *testing.T) {
	glueDir, vocab := synthGlue(t, 32, 12)
	for _, tc := range []struct {
		variant string
		finite  bool
	}{
		{nvib.ModelNVDPClipped, true},
		{nvib.ModelNVDP, false},
	} {
		t.Run(tc.variant, func(t *testing.T) {
			o := synthOptions(t, glueDir, vocab, filepath.Join(t.TempDir(), tc.variant))
			o.Variant, o.Epochs = tc.variant, 1
			if tc.variant == nvib.ModelNVDPClipped {
				o.CMu, o.LogvarMargin, o.CAlphaMin = 2, 0.6931, 0.3 // the main job's constants
			}
			rep, err := RunPipeline(context.Background(), TextPipeline(), PipelineOptions{Train: o, Audit: audit.DefaultOptions()}, nil)
			if err != nil {
				t.Fatal(err)
			}
			pr := rep.Privacy
			if pr == nil || pr.Certified == nil {
				t.Fatalf("privacy %+v: no certified block", pr)
			}
			if pr.Empirical.Label != privacy.LabelEmpirical || !strings.Contains(pr.Empirical.Scope, "max over 132 ordered pairs of 12 dev texts; not a guarantee") ||
				!strings.Contains(pr.Empirical.BDP, "estimate (Student-t") {
				t.Errorf("empirical label %+v", pr.Empirical)
			}
			post, err := privacy.ReadPosteriors(pr.Posteriors)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := nvib.LoadConfig(o.Out)
			if err != nil {
				t.Fatal(err)
			}
			set, ok := cfg.ClipSet(post.N)
			if !ok || post.N != o.MaxSeqLen+1 {
				t.Fatalf("model clip set ok %v, N %d", ok, post.N)
			}
			want, err := privacy.Certify(set, pr.Order, privacy.DirectionStandard)
			if err != nil {
				t.Fatal(err)
			}
			_, fromFile := metadataCertificate(t, post, pr.Order)
			c := pr.Certified
			same := func(a, b jsonfloat.Float) bool {
				return a == b || math.IsInf(float64(a), 1) && math.IsInf(float64(b), 1)
			}
			if !same(c.RD, want.RD) || !same(c.RD, fromFile.RD) || c.Finite != tc.finite || c.Order != pr.Order || c.Delta != pr.Delta {
				t.Errorf("rd_certified %v (finite %v, order %v, delta %v); model clip set %v, file metadata %v", c.RD, c.Finite, c.Order, c.Delta, want.RD, fromFile.RD)
			}
			// The certificate bounds every audited pair.
			if pr.InvalidPairs == 0 && !(float64(pr.RDMax) <= float64(c.RD)) {
				t.Errorf("empirical rd_max %v above rd_certified %v", pr.RDMax, c.RD)
			}
			if !tc.finite && (c.Reason == "" || !math.IsInf(float64(c.Epsilon), 1)) {
				t.Errorf("unclipped: reason %q epsilon %v, want a reason and +Inf", c.Reason, c.Epsilon)
			}

			// report.json: the new keys next to the old ones; +Inf is null.
			raw := readJSON(t, filepath.Join(o.Out, ReportFile))
			p := raw["privacy"].(map[string]any)
			for _, k := range []string{"rd_max", "rd_mean", "bdp_epsilon", "empirical", "certified"} {
				if _, ok := p[k]; !ok {
					t.Errorf("report privacy lacks %q", k)
				}
			}
			rc := p["certified"].(map[string]any)
			for _, k := range []string{"label", "scope", "source", "constants", "order", "rd_certified", "parts", "finite", "max_order",
				"delta", "epsilon", "best_order", "bdp_epsilon_certified", "bdp_order_certified", "orders"} {
				if _, ok := rc[k]; !ok {
					t.Errorf("certified block lacks %q", k)
				}
			}
			if rc["source"] != ModelSource(o.Out) || rc["scope"] != privacy.CertifiedScope(1, post.N, post.P) {
				t.Errorf("report.json certified source %v scope %v", rc["source"], rc["scope"])
			}
			if tc.finite && rc["rd_certified"] != float64(want.RD) {
				t.Errorf("report.json rd_certified %v, want %v", rc["rd_certified"], float64(want.RD))
			}
			if !tc.finite && (rc["rd_certified"] != "Infinity" || rc["reason"] == nil) {
				t.Errorf("report.json unclipped: rd_certified %v reason %v, want \"Infinity\" and a reason", rc["rd_certified"], rc["reason"])
			}
			// The sweep reads the report back.
			back, err := ReadReport(o.Out)
			if err != nil || back.Privacy == nil || back.Privacy.Certified == nil || !same(back.Privacy.Certified.RD, c.RD) {
				t.Errorf("ReadReport: %+v, %v", back, err)
			}

			// eval_dev.json: the certified block at the clip's order.
			var ev EvalResult
			b, err := os.ReadFile(filepath.Join(o.Out, "eval_dev.json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &ev); err != nil {
				t.Fatal(err)
			}
			if ev.Certified == nil || ev.Certified.Components != o.MaxSeqLen+1 || ev.Certified.Label != privacy.LabelCertified || ev.Certified.Finite != tc.finite {
				t.Errorf("eval_dev.json certified %+v", ev.Certified)
			}
		})
	}
}
