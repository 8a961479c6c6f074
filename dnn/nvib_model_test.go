package dnn_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/nvdp-project/nvdp/dnn"
	"github.com/nvdp-project/nvdp/encoder"
	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/privacy"
)

// Tolerances of the NVDP block and the model (relErr, FP32).
const (
	// tolNVDPBlock: the TransformerLayer twin's (tolTransformer) plus the
	// key bias, a double sum over P in another order rounded to float32.
	// Derivation: tolTransformer's layer (~1e-6 each part) plus a double key-bias sum over P rounded once (1 ulp); FMA merges roundings.
	tolNVDPBlock = 1e-5
	// tolNVDPModel: the model end to end composes the encoder, NVIB layer,
	// sample, block, head and loss twins, each within 1e-5; their
	// differences (GEMM summation order, LayerNorm's float32 statistics,
	// expf) pass through about ten normalisations and products forward and
	// back, and the Gamma draws are made at shapes that differ in the last
	// float32 bit of alpha. The bar for a layer is 1e-4.
	// Derivation: ~10 twins each within ~1e-6 composed forward and back through normalisations (gain ~1), and Gamma draws whose shapes differ by 1 float32 ulp of alpha: ~1e-5 expected; 1e-4 is the bar.
	tolNVDPModel = 1e-4
	// tolNVDPLoss: the loss and its KL terms are float64 sums of float32
	// quantities that agree to tolNVDPModel.
	// Derivation: float64 sums of float32 quantities within tolNVDPModel, averaged over the batch: the loss moves by ~1e-6 relative; 1e-5 = 10x.
	tolNVDPLoss = 1e-5
)

// blockCase is a configuration of TestNVDPBlockTwin.
type blockCase struct {
	name    string
	mode    privacy.Mode
	dropout float64
}

// testNVDPBlockTwin: the device NVDP block's output and backward pass (dZ,
// d ln pi, dx in reference mode, every parameter's gradient) equal
// nvib.Block's on the same posterior and draw: principled (queries from
// Z, key bias ln pi - ||z||^2/(2 sqrt d_h)) with hidden dropout drawn by
// both from one Philox stream, and reference (queries from x, the clamped
// ln pi, the +1 and float32-min padding bias) with padding.
func testNVDPBlockTwin(t *testing.T, e *dnn.Engine) {
	rng := rand.New(rand.NewPCG(41, 1))
	B, S, P := 2, 4, 8
	N := S + 1
	for _, tc := range []blockCase{{"principled", privacy.ModePrincipled, 0.2}, {"reference", privacy.ModeReference, 0}} {
		blk, err := nvib.NewBlock("nvdp", nvib.BlockConfig{Hidden: P, Heads: 2, Intermediate: 12, LayerNormEps: 1e-12, Dropout: tc.dropout, Mode: tc.mode}, rng)
		orPanic(err)
		for _, p := range blk.Params() {
			p.InitNormal(rng, 0.3)
		}
		for _, ln := range []*nn.LayerNorm{blk.AttnLN, blk.OutLN} {
			for i := range ln.Weight.Value.Data {
				ln.Weight.Value.Data[i] += 1
			}
		}
		dblk := e.NewNVDPBlock(blk)
		alpha := make([]float32, B*N)
		for k := range alpha {
			alpha[k] = float32(0.2 + rng.Float64())
		}
		var mask []float32
		if tc.mode.IsReference() {
			mask = nvibPadMask(B, N)
		}
		post := hostPosterior(rng, B, N, P, alpha, mask, !tc.mode.IsReference())
		dpost := e.UploadPosterior(post)
		s := nvib.Draw(post, rand.New(rand.NewPCG(2, 2)))
		ds := e.NVIBDrawHost(dpost, rand.New(rand.NewPCG(2, 2)))
		x := randn(rng, 1, B, S, P)
		g := &dnn.Philox{Key: rng.Uint64()}
		host := *g
		y, c := blk.Forward(x, post, s, true, rand.New(&host))
		dy, dc := dblk.Forward(e, e.Upload(x), dpost, ds, true, g)
		if g.Pos != host.Pos {
			t.Errorf("%s: device Pos %d, host %d", tc.name, g.Pos, host.Pos)
		}
		near(t, e, tc.name+" y", dy, y, tolNVDPBlock)
		gy := randn(rng, 1, B, S, P)
		dZ, dLogPi, dx := blk.Backward(c, s, gy)
		ddZ, ddLogPi, ddx := dblk.Backward(e, dc, ds, e.Upload(gy))
		near(t, e, tc.name+" dZ", ddZ, dZ, tolNVDPBlock)
		lp := nn.New(B, N)
		for k, v := range dLogPi {
			lp.Data[k] = float32(v)
		}
		near(t, e, tc.name+" d ln pi", ddLogPi, lp, tolNVDPBlock)
		if (dx == nil) != (ddx == nil) {
			t.Errorf("%s: dx %v, device %v", tc.name, dx != nil, ddx != nil)
		} else if dx != nil {
			near(t, e, tc.name+" dx", ddx, dx, tolNVDPBlock)
		}
		nearLayerParams(t, e, tc.name, dblk.Params(), blk.Params(), tolNVDPBlock)
		e.FreeParams(dblk.Params())
	}
}

// modelCase is a configuration of TestNVDPModelTwin.
type modelCase struct {
	model   string
	mode    privacy.Mode
	head    string
	latent  int
	labels  int
	dropout float64
}

func (c modelCase) String() string {
	return fmt.Sprintf("%s/%s/%s/P=%d/labels=%d/dropout=%v", c.model, c.mode, c.head, c.latent, c.labels, c.dropout)
}

// testNVDPModelTwin: the device model (encoder twin, NVIB layer or gaussian
// release, the draw with the host's random numbers, block, head, loss) on a
// tiny BERT equals nvib.Model from the same seed: the loss and its terms,
// the logits, the posterior and the sample, and after Backward every
// parameter's gradient (the encoder's included): nvdp-clipped principled
// with every dropout on (the device's Philox stream, nvib.Model through
// rand.New of a copy), nvdp in reference mode with the first-token head
// and a regression loss, gaussian at a latent width P < H with its
// projection. The posterior export (EncodePosterior) equals nvib's; the
// draws on the device (NVDPOptions without Rng) give a finite loss.
func testNVDPModelTwin(t *testing.T, e *dnn.Engine) {
	cases := []modelCase{ // few and small: the CPU stand-in runs a thread per CUDA thread
		{nvib.ModelNVDPClipped, privacy.ModePrincipled, nvib.HeadMean, 0, 3, 0.1},
		{nvib.ModelNVDP, privacy.ModeReference, nvib.HeadFirstToken, 0, 1, 0},
		{nvib.ModelGaussian, privacy.ModePrincipled, nvib.HeadMean, 8, 2, 0},
	}
	rng := rand.New(rand.NewPCG(51, 3))
	for _, tc := range cases {
		enc := tinyEncoder(t, rng, "bert", 1, tc.dropout)
		cfg := nvib.DefaultConfig(tc.model, tc.mode, enc.Config.HiddenSize, 2, 24, tc.labels)
		cfg.Head, cfg.LatentDim, cfg.Dropout = tc.head, tc.latent, tc.dropout
		cfg.LambdaG, cfg.LambdaD = 0.5, 0.3
		cfg.Clip.CMu, cfg.Clip.CAlphaMax = 1.0, 1.2
		cfg.ReleaseLen = 5
		// a prior pseudo-count other than 1: the prior component's Gamma
		// shape (1/A) A would sit on Marsaglia-Tsang's a < 1 branch point,
		// where the last bit of A (which the GEMMs' rounding decides)
		// changes the draws that follow
		cfg.Prior.LogAlpha = 0.25
		if tc.mode == privacy.ModePrincipled {
			cfg.Clip.CAlphaMin = nvib.PrincipledAlphaMin(cfg.Clip.Order, 1.2)
		}
		m, err := nvib.NewModel(cfg, nvib.EncoderBackbone{Encoder: enc}, rng)
		orPanic(err)
		if m.NVIB != nil { // larger weights: clipping and the alpha path active
			for _, p := range m.NVIB.Params() {
				p.InitNormal(rng, 0.4)
			}
		}
		if m.Block != nil {
			for _, p := range m.Block.Params() {
				p.InitNormal(rng, 0.3)
			}
			for _, ln := range []*nn.LayerNorm{m.Block.AttnLN, m.Block.OutLN} {
				for i := range ln.Weight.Value.Data {
					ln.Weight.Value.Data[i] += 1
				}
			}
		}
		for _, p := range m.Head.Params() {
			p.InitNormal(rng, 0.3)
		}
		dm, err := e.NewNVDPModel(m)
		orPanic(err)
		in := encoder.Input{B: 2, S: 4, IDs: []int32{1, 2, 3, 0, 4, 5, 0, 0}, Mask: []float32{1, 1, 1, 0, 1, 1, 0, 0}}
		labels := &nvib.Labels{Class: []int{2, 1}}
		if tc.labels == 2 {
			labels.Class = []int{0, 1}
		}
		if tc.labels == 1 {
			labels = &nvib.Labels{Value: []float32{0.3, -1}}
		}
		g := &dnn.Philox{Key: rng.Uint64()}
		host := *g
		opt := nvib.ForwardOptions{Train: true, Rng: rand.New(&host), KLScale: 0.7}
		dopt := dnn.NVDPOptions{Train: true, G: g, Rng: rand.New(g), KLScale: 0.7}
		out, c, err := m.Forward(in, labels, opt)
		orPanic(err)
		dout, dc, err := dm.Forward(e, in, labels, dopt)
		orPanic(err)
		name := tc.String()
		if g.Pos != host.Pos {
			t.Errorf("%s: device Pos %d, host %d", name, g.Pos, host.Pos)
		}
		for _, v := range []struct {
			what      string
			got, want float64
		}{{"loss", dout.Loss, out.Loss}, {"task", dout.Task, out.Task}, {"L_G", dout.LG, out.LG}, {"L_D", dout.LD, out.LD}} {
			if d := math.Abs(v.got - v.want); !(d <= tolNVDPLoss*math.Max(1, math.Abs(v.want))) {
				t.Errorf("%s %s: device %v, nvib %v", name, v.what, v.got, v.want)
			}
		}
		near(t, e, name+" logits", dout.Logits, out.Logits, tolNVDPModel)
		if out.Posterior != nil {
			near(t, e, name+" mu", dout.Posterior.Mu, out.Posterior.Mu, tolNVDPModel)
			near(t, e, name+" logvar", dout.Posterior.Logvar, out.Posterior.Logvar, tolNVDPModel)
			near(t, e, name+" alpha", dout.Posterior.Alpha, out.Posterior.Alpha, tolNVDPModel)
			near(t, e, name+" z", dout.Sample.Z, out.Sample.Z, tolNVDPModel)
			pi, _ := dout.Sample.Dir.Download(e)
			if r := relErr(pi, out.Sample.Dir.Pi); !(r <= tolNVDPModel) {
				t.Errorf("%s pi: relative error %.3g", name, r)
			}
		}
		orPanic(m.Backward(c))
		orPanic(dm.Backward(e, dc))
		ps, dps := m.Params(), dm.Params()
		if len(ps) != len(dps) {
			t.Errorf("%s: %d parameters, device %d", name, len(ps), len(dps))
		}
		names := len(ps) == len(dps)
		for i := range min(len(ps), len(dps)) {
			if ps[i].Name != dps[i].Name {
				t.Errorf("%s: parameter %d is %s, device %s", name, i, ps[i].Name, dps[i].Name)
				names = false
			}
		}
		if names { // (nearLayerParams' t.Fatal on a name would stop the device goroutine)
			nearLayerParams(t, e, name, dps, ps, tolNVDPModel)
		}
		if m.Releases() {
			post, x, err := m.EncodePosterior(in)
			orPanic(err)
			dpost, dx, err := dm.EncodePosterior(e, in)
			orPanic(err)
			near(t, e, name+" export x", dx, x, tolNVDPModel)
			hp := dpost.Download(e)
			for _, v := range []struct {
				what      string
				got, want *nn.Tensor
			}{{"mu", hp.Mu, post.Mu}, {"logvar", hp.Logvar, post.Logvar}, {"alpha", hp.Alpha, post.Alpha}} {
				if r := relErr(v.got.Data, v.want.Data); !(r <= tolNVDPModel) {
					t.Errorf("%s export %s: relative error %.3g", name, v.what, r)
				}
			}
			if hp.PadsReleased != post.PadsReleased || relErr(hp.Mask, post.Mask) != 0 || hp.B != post.B || hp.N != post.N || hp.P != post.P {
				t.Errorf("%s export: mask %v pads %v [%d %d %d], nvib %v %v [%d %d %d]", name, hp.Mask, hp.PadsReleased, hp.B, hp.N, hp.P,
					post.Mask, post.PadsReleased, post.B, post.N, post.P)
			}
		}
		e.FreeParams(dm.Params())
	}
}
