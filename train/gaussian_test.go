package train

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/nvdp-project/nvdp/audit"
	"github.com/nvdp-project/nvdp/model"
	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/privacy"
)

// TestGaussianPipeline: `nvdp run --variant gaussian --target-epsilon 600`
// on synthetic SST-2 (the label is a sentiment word): the radius is
// calibrated so that the certified epsilon is the target; the model learns
// above chance; report.json has the audit of the release (every pair finite,
// rd_max below the certificate), the certified block at the audit's order
// (the closed form 2 order C^2 L / sigma^2) and a collapse check that finds
// none; certificate.json records the calibration; the posterior file has
// max-seq-len + 1 components with alpha GaussianAlpha and logvar ln sigma^2.
func TestGaussianPipeline(t *testing.T) {
	glueDir, vocab := synthGlue(t, 256, 64)
	o := synthOptions(t, glueDir, vocab, filepath.Join(t.TempDir(), "gaussian"))
	const eps = 600 // C = 3.77 at L = 16: large against the noise (sigma 1), small against sqrt(d_h) (see docs/model.md)
	o.Variant, o.Epochs, o.BatchSize, o.TargetEpsilon, o.LR, o.HandSetClipping = nvib.ModelGaussian, 6, 16, eps, 1e-2, false
	o.ScratchConfig = tinyConfig(t, 32, 1, 32)
	rep, err := RunPipeline(context.Background(), TextPipeline(), PipelineOptions{Train: o, EvalSeed: 2, Audit: audit.DefaultOptions()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := model.LoadCalibration(o.Out)
	if err != nil {
		t.Fatal(err)
	}
	if cert.Variant != nvib.ModelGaussian || cert.Guarantee == nil || math.Abs(float64(cert.Guarantee.Epsilon)-eps) > 1e-6*eps ||
		float64(cert.Guarantee.Epsilon) > eps || cert.CMu != rep.CMu || cert.Components != 17 {
		t.Fatalf("certificate.json: variant %q epsilon %v C %v (report %v) N %d", cert.Variant, cert.Guarantee.Epsilon, cert.CMu, rep.CMu, cert.Components)
	}
	if rep.Variant != nvib.ModelGaussian || rep.Lambda != 0 || rep.Sigma != 1 || !(rep.CMu > 0) {
		t.Errorf("report identity: variant %q lambda %v sigma %v C %v", rep.Variant, rep.Lambda, rep.Sigma, rep.CMu)
	}
	cc := rep.Collapse
	if cc == nil || cc.AtChance || cc.Collapsed || !(rep.Utility["accuracy"] > float64(cc.Chance)+0.15) {
		t.Errorf("utility: accuracy %v, collapse check %+v: want well above chance", rep.Utility["accuracy"], cc)
	}
	p := rep.Privacy
	if p == nil || p.Certified == nil {
		t.Fatalf("privacy %+v", p)
	}
	R := privacy.StoredRadius(rep.CMu)
	want := 2 * p.Order * R * R * 16
	if c := p.Certified; !c.Finite || math.Abs(float64(c.RD)-want) > 1e-9*want || c.Components != 17 || c.Label != privacy.LabelCertified {
		t.Errorf("certified block: RD %v (closed form %v) N %d label %q", c.RD, want, c.Components, c.Label)
	}
	if p.InvalidPairs != 0 || p.Pairs != 64*63 || p.Components != 17 || !(float64(p.RDMax) > 0) || !(float64(p.RDMax) <= want) {
		t.Errorf("audit: invalid %d pairs %d N %d rd_max %v (certificate %v)", p.InvalidPairs, p.Pairs, p.Components, p.RDMax, want)
	}
	post, err := privacy.ReadPosteriors(p.Posteriors)
	if err != nil {
		t.Fatal(err)
	}
	for k, a := range post.Alpha {
		if a != nvib.GaussianAlpha {
			t.Fatalf("alpha[%d] = %v", k, a)
		}
	}
	for k, lv := range post.Logvar {
		if lv != 0 {
			t.Fatalf("logvar[%d] = %v, want ln 1", k, lv)
		}
	}
	if post.Metadata["model"] != nvib.ModelGaussian || post.Metadata["gaussian_release_len"] != "16" {
		t.Errorf("posterior metadata %v", post.Metadata)
	}
}
