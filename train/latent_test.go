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

func latentDim(p int) *int { return &p }

// TestLatentPipeline: `nvdp run` (RunPipeline) on synthetic SST-2 at P = 8
// from a hidden size of 16, nvdp-clipped and gaussian, with a target
// epsilon: certificate.json has Dims = P; the posterior file has P
// dimensions and its metadata certify as the model does (the `nvdp audit`
// path); report.json's certified block is privacy.NewCertifiedReport of the
// model's clip set at N = max-seq-len + 1 and P, equal to privacy.Certify of
// the same constants, its audit finite and below it; the saved model loads
// (the rectangular projections included) and Evaluate certifies P as well.
func TestLatentPipeline(t *testing.T) {
	if testing.Short() {
		t.Skip("trains two tiny models")
	}
	glueDir, vocab := synthGlue(t, 64, 16)
	const P, eps = 8, 200
	for _, variant := range []string{nvib.ModelNVDPClipped, nvib.ModelGaussian} {
		t.Run(variant, func(t *testing.T) {
			o := synthOptions(t, glueDir, vocab, filepath.Join(t.TempDir(), variant))
			o.Variant, o.Epochs, o.TargetEpsilon, o.LatentDim, o.HandSetClipping = variant, 1, eps, latentDim(P), false
			rep, err := RunPipeline(context.Background(), TextPipeline(), PipelineOptions{Train: o, EvalSeed: 2, Audit: audit.DefaultOptions()}, nil)
			if err != nil {
				t.Fatal(err)
			}
			cert, err := model.LoadCalibration(o.Out)
			if err != nil {
				t.Fatal(err)
			}
			if cert.Dims != P || cert.Components != 17 || float64(cert.Guarantee.Epsilon) > eps {
				t.Errorf("certificate.json: P %d, N %d, epsilon %v", cert.Dims, cert.Components, cert.Guarantee.Epsilon)
			}
			cfg, err := nvib.LoadConfig(o.Out)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Hidden != 16 || cfg.LatentDim != P {
				t.Fatalf("nvdp_config.json: hidden %d, latent_dim %d", cfg.Hidden, cfg.LatentDim)
			}
			pr := rep.Privacy
			post, err := privacy.ReadPosteriors(pr.Posteriors)
			if err != nil {
				t.Fatal(err)
			}
			if post.P != P || post.N != 17 {
				t.Fatalf("posterior file [N %d, P %d]", post.N, post.P)
			}
			set, _ := cfg.ClipSet(17)
			want, err := privacy.Certify(set, pr.Order, privacy.DirectionStandard)
			if err != nil {
				t.Fatal(err)
			}
			// `nvdp audit` certifies the file from its metadata and its P
			fileSet, fromFile := metadataCertificate(t, post, pr.Order)
			if fileSet.Dims != P || math.Abs(float64(fromFile.RD)-float64(want.RD)) > 1e-9*float64(want.RD) {
				t.Errorf("posterior file's clip set: P %d, RD %v; model's RD %v", fileSet.Dims, fromFile.RD, want.RD)
			}
			c := pr.Certified
			if c == nil {
				t.Fatal("report: no certified block")
			}
			if c.Dims != P || c.Components != 17 || !c.Finite || float64(c.RD) != float64(want.RD) {
				t.Fatalf("report certified block: P %d, N %d, finite %v, RD %v; want RD %v at P %d", c.Dims, c.Components, c.Finite, c.RD, want.RD, P)
			}
			if pr.InvalidPairs != 0 || !(float64(pr.RDMax) > 0) || !(float64(pr.RDMax) <= float64(want.RD)) {
				t.Errorf("audit: invalid %d, rd_max %v, certificate %v", pr.InvalidPairs, pr.RDMax, want.RD)
			}
			b, err := model.Load(o.Out)
			if err != nil {
				t.Fatal(err)
			}
			if m := b.Model; m.NVIB != nil && m.NVIB.Mu.W.Value.Shape[0] != P || m.Gauss != nil && m.Gauss.Proj.Out != P {
				t.Errorf("loaded model: not at P %d", P)
			}
			eo := DefaultEvalOptions(b)
			eo.Out = filepath.Join(t.TempDir(), "eval")
			r, err := Evaluate(b, eo)
			if err != nil {
				t.Fatal(err)
			}
			if r.Certified == nil || r.Release == nil || r.Certified.Dims != P || r.Release.P != P {
				t.Fatalf("Evaluate: certified %v, release %v", r.Certified != nil, r.Release != nil)
			}
			if r.Certified.Dims != P || r.Release.P != P {
				t.Errorf("Evaluate: certified P %d, release P %d, want %d", r.Certified.Dims, r.Release.P, P)
			}
		})
	}
}
