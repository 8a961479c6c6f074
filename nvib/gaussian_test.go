package nvib

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/audit"
	"github.com/nvdp-project/nvdp/encoder"
	"github.com/nvdp-project/nvdp/jsonfloat"
	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/nn/nntest"
	"github.com/nvdp-project/nvdp/privacy"
)

// gaussianModel is a small gaussian model (release length L, radius C,
// noise variance v) on the embedding-table backbone, with O(1) block and
// head weights.
func gaussianModel(t *testing.T, L, P int, C, v float64) *Model {
	t.Helper()
	rng := rand.New(rand.NewPCG(81, 82))
	cfg := DefaultConfig(ModelGaussian, privacy.ModePrincipled, P, 2, 2*P, 3)
	cfg.Clip.CMu, cfg.ReleaseLen, cfg.Prior.Var = C, L, v
	m, err := NewModel(cfg, newFake(rng, 10, P, 0.8), rng)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []*nn.Linear{m.Block.Query, m.Block.Key, m.Block.Value, m.Block.AttnOut, m.Block.Inter, m.Block.Out} {
		l.W.InitNormal(rng, 0.3)
		l.B.InitNormal(rng, 0.3)
	}
	for _, p := range m.Head.Params() {
		p.InitNormal(rng, 0.3)
	}
	return m
}

// TestGaussianReleasePosterior: the release's posterior for two inputs of
// lengths 2 and 5 padded to S = 7 and released at L = 9: N = 10; component 0
// and every pad (positions 3..7 and 6..7 in the batch, 8..9 past it) have
// mean exactly 0; real rows are x min(1, C/||x||) (rows both inside and
// outside the ball) and within the stored radius; logvar ln sigma^2 and
// alpha GaussianAlpha everywhere; the mask labels the pads. S > L is an error.
func TestGaussianReleasePosterior(t *testing.T) {
	const B, S, L, P = 2, 7, 9, 4
	const C, v = 1.3, 0.49
	rng := rand.New(rand.NewPCG(1, 2))
	x := nntest.RandTensor(rng, B, S, P)
	for j := 0; j < P; j++ { // row (0, 1) well inside the ball
		x.Data[P+j] *= 0.1
	}
	in, _ := twoLengths()
	g := &GaussianRelease{C: C, Var: v, L: L}
	post, _, err := g.Forward(x, in.Mask)
	if err != nil {
		t.Fatal(err)
	}
	if post.B != B || post.N != L+1 || post.P != P || !post.PadsReleased {
		t.Fatalf("posterior [%d,%d,%d] pads released %v", post.B, post.N, post.P, post.PadsReleased)
	}
	inside, outside := 0, 0
	for b := 0; b < B; b++ {
		for i := 0; i < post.N; i++ {
			k := b*post.N + i
			row := post.Mu.Data[k*P : (k+1)*P]
			real := i >= 1 && i <= S && in.Mask[b*S+i-1] == 1
			if wantMask := float32(map[bool]int{true: 1, false: 0}[real || i == 0]); post.Mask[k] != wantMask {
				t.Errorf("mask[%d,%d] = %v, want %v", b, i, post.Mask[k], wantMask)
			}
			if post.Alpha.Data[k] != GaussianAlpha {
				t.Errorf("alpha[%d,%d] = %v", b, i, post.Alpha.Data[k])
			}
			for j := 0; j < P; j++ {
				if post.Logvar.Data[k*P+j] != float32(math.Log(v)) {
					t.Fatalf("logvar[%d,%d,%d] = %v, want ln %v", b, i, j, post.Logvar.Data[k*P+j], v)
				}
			}
			if !real {
				for _, m := range row {
					if m != 0 {
						t.Fatalf("component %d of example %d (prior or pad) has mean %v, want 0", i, b, row)
					}
				}
				continue
			}
			xr := x.Data[(b*S+i-1)*P : (b*S+i)*P]
			var n2, r2 float64
			for j := range xr {
				n2 += float64(xr[j]) * float64(xr[j])
				r2 += float64(row[j]) * float64(row[j])
			}
			scale := math.Min(1, C/math.Sqrt(n2))
			if scale < 1 {
				outside++
			} else {
				inside++
			}
			for j := range xr {
				if want := float64(xr[j]) * scale; math.Abs(float64(row[j])-want) > 1e-6*(1+math.Abs(want)) {
					t.Errorf("mu[%d,%d,%d] = %v, want %v", b, i, j, row[j], want)
				}
			}
			if math.Sqrt(r2) > privacy.StoredRadius(C) {
				t.Errorf("row %d of example %d has norm %v > stored radius %v", i, b, math.Sqrt(r2), privacy.StoredRadius(C))
			}
		}
	}
	if inside == 0 || outside == 0 {
		t.Errorf("rows inside %d, outside %d: want both", inside, outside)
	}
	if _, _, err := (&GaussianRelease{C: C, Var: v, L: S - 1}).Forward(x, in.Mask); err == nil {
		t.Error("S > L: no error")
	}
}

// TestGaussianReleaseGradient: the release path z = clip_C(x) + sigma eps
// (eps fixed) by finite differences of sum(w ⊙ Z) w.r.t. x, for rows inside
// the ball (identity), outside it (projection Jacobian) and pads (0), at two
// noise scales.
func TestGaussianReleaseGradient(t *testing.T) {
	for _, tc := range []struct {
		name string
		C, v float64
	}{{"C 1.3, var 1", 1.3, 1}, {"C 0.6, var 0.25", 0.6, 0.25}} {
		t.Run(tc.name, func(t *testing.T) {
			const B, S, L, P = 2, 7, 8, 4
			rng := rand.New(rand.NewPCG(3, 4))
			x := nntest.RandTensor(rng, B, S, P)
			for j := 0; j < P; j++ {
				x.Data[j] *= 0.05 // row (0, 0) inside the ball
			}
			in, _ := twoLengths()
			g := &GaussianRelease{C: tc.C, Var: tc.v, L: L}
			post, _, err := g.Forward(x, in.Mask)
			if err != nil {
				t.Fatal(err)
			}
			s := DrawGaussian(post, rand.New(rand.NewPCG(5, 6)))
			w := nntest.RandTensor(rng, B, L+1, P)
			loss := func() float64 {
				p, _, err := g.Forward(x, in.Mask)
				if err != nil {
					t.Fatal(err)
				}
				var l float64
				for k, m := range p.Mu.Data { // Z = mu + sigma eps with the fixed eps
					z := float64(m) + math.Sqrt(g.StoredVar())*float64(s.Eps.Data[k])
					l += float64(w.Data[k]) * z
				}
				return l
			}
			_, c, _ := g.Forward(x, in.Mask)
			dx := g.Backward(c, w.Clone())
			for b := 0; b < B; b++ {
				for i := 0; i < S; i++ {
					if in.Mask[b*S+i] != 0 {
						continue
					}
					for _, d := range dx.Data[(b*S+i)*P : (b*S+i+1)*P] {
						if d != 0 {
							t.Fatalf("pad (%d, %d) gets gradient %v", b, i, d)
						}
					}
				}
			}
			for j := 0; j < P; j++ { // inside the ball: the identity
				if dx.Data[j] != w.Data[P+j] {
					t.Errorf("inside row: dx %v, want w %v", dx.Data[j], w.Data[P+j])
				}
			}
			nntest.CheckGradStrict(t, "gaussian release dx", loss, x.Data, dx.Data, nntest.GradOpts{Eps: 1e-3, RelTol: 1e-2, AbsTol: 1e-3})
		})
	}
}

// TestGaussianOutputInvariantToPadding: the release always has L positions,
// so the same two texts padded to S = 5 (the longest) or S = 8 = L give
// bit-identical releases, logits, loss and parameter gradients (the noise is
// drawn for [B, L+1, P] in the same order). A principled nvdp-clipped model,
// whose release has S+1 components, differs (so the test can fail).
func TestGaussianOutputInvariantToPadding(t *testing.T) {
	ids := [][]int32{{1, 2}, {3, 4, 5, 6, 7}}
	batch := func(S int) (encoder.Input, *Labels) {
		in := encoder.Input{B: 2, S: S, IDs: make([]int32, 2*S), Mask: make([]float32, 2*S)}
		for b, seq := range ids {
			for i, id := range seq {
				in.IDs[b*S+i], in.Mask[b*S+i] = id, 1
			}
		}
		return in, &Labels{Class: []int{1, 2}}
	}
	type result struct {
		z, logits, grads []float32
		loss             float64
	}
	run := func(m *Model, S int) result {
		in, labels := batch(S)
		out, c, err := m.Forward(in, labels, ForwardOptions{Train: true, Rng: rand.New(rand.NewPCG(3, 4)), KLScale: 1})
		if err != nil {
			t.Fatal(err)
		}
		nn.ZeroGrads(m.Params())
		if err := m.Backward(c); err != nil {
			t.Fatal(err)
		}
		r := result{z: out.Sample.Z.Data, logits: out.Logits.Data, loss: out.Loss}
		for _, p := range m.Params() {
			r.grads = append(r.grads, p.Grad.Data...)
		}
		return r
	}
	same := func(a, b []float32) bool {
		if len(a) != len(b) {
			return false
		}
		for i := range a {
			if a[i] != b[i] {
				return false
			}
		}
		return true
	}
	for _, tc := range []struct {
		name      string
		model     func() *Model
		invariant bool
	}{
		{"gaussian", func() *Model { return gaussianModel(t, 8, 8, 1.2, 1) }, true},
		{"nvdp-clipped", func() *Model {
			m := releaseModel(t, privacy.ModePrincipled, 8)
			m.testLogGamma = quantileGamma
			return m
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.model()
			r5, r8 := run(m, 5), run(m, 8)
			eq := same(r5.z, r8.z) && same(r5.logits, r8.logits) && same(r5.grads, r8.grads) && r5.loss == r8.loss
			if eq != tc.invariant {
				t.Errorf("S = 5 vs 8: outputs equal %v, want %v (logits %v vs %v)", eq, tc.invariant, r5.logits, r8.logits)
			}
			if tc.invariant && len(r5.z) != 2*9*8 {
				t.Errorf("release has %d values, want B (L+1) P = %d", len(r5.z), 2*9*8)
			}
		})
	}
}

// TestGaussianCertificateClosedForm: Certify on the gaussian clip set is the
// Gaussian mechanism's RDP, order (2C)^2 L / (2 sigma^2) = 2 order C^2 L /
// sigma^2 with C the stored radius and sigma^2 the stored variance, to 1e-9
// relative, all of it in the mean part; finite at every order; the curve
// agrees at every order of the grid.
func TestGaussianCertificateClosedForm(t *testing.T) {
	for _, tc := range []struct {
		C, sigma float64
		L, P     int
		order    float64
	}{
		{0.3372, 1, 128, 128, 1.1},
		{2, 1, 16, 8, 2},
		{0.05, 0.5, 7, 3, 1.01},
		{1.7, 2.3, 40, 16, 32},
		{0.9, 0.1, 1, 1, 1024},
	} {
		set := GaussianClipSet(tc.C, tc.sigma*tc.sigma, tc.L, tc.P)
		R := privacy.StoredRadius(tc.C)
		s2 := math.Exp(float64(float32(math.Log(tc.sigma * tc.sigma))))
		want := func(order float64) float64 { return 2 * order * R * R * float64(tc.L) / s2 }
		c, err := privacy.Certify(set, tc.order, privacy.DirectionStandard)
		if err != nil {
			t.Fatal(err)
		}
		rd := float64(c.RD)
		if !c.Finite || math.Abs(rd-want(tc.order)) > 1e-9*want(tc.order) {
			t.Errorf("C %v sigma %v L %d order %v: certified %v, closed form %v", tc.C, tc.sigma, tc.L, tc.order, rd, want(tc.order))
		}
		if c.Parts.Variance != 0 || c.Parts.Dirichlet != 0 || math.Abs(float64(c.Parts.Mean)-rd) > 1e-12*rd || !math.IsInf(set.MaxOrder(), 1) {
			t.Errorf("parts %+v, max order %v: want everything in the mean part, every order finite", c.Parts, set.MaxOrder())
		}
		if pb, err := privacy.PairBound(tc.order, c.Witness.View(0), c.Witness.View(1)); err != nil || math.Abs(pb.Total-rd) > 1e-9*rd {
			t.Errorf("witness pair bound %v (%v), certificate %v", pb.Total, err, rd)
		}
		g, err := privacy.CertifyCurve(set, privacy.CurveOptions{Direction: privacy.DirectionStandard, Releases: 3, Delta: 1e-5})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range g.Curve {
			if w := 3 * want(o.Order); math.Abs(float64(o.RD)-w) > 1e-9*w {
				t.Errorf("curve at order %v (3 releases): %v, closed form %v", o.Order, o.RD, w)
			}
		}
	}
}

// TestGaussianCalibration: privacy.Calibrate with only C free (the logvar
// range and alpha fixed) on the gaussian set meets an epsilon target within
// the calibrator's tolerance (1e-6 relative, never above) and an RD target at
// C = sqrt(R sigma^2 / (2 order L)) (closed form, to the float32 radius).
func TestGaussianCalibration(t *testing.T) {
	const L, P = 32, 16
	sp := privacy.Split{FixMargin: true, FixAlphaMin: true}
	for _, tc := range []struct {
		eps, v float64
	}{{8, 1}, {64, 1}, {512, 0.25}} {
		cal, err := privacy.Calibrate(GaussianClipSet(1, tc.v, L, P), privacy.EpsilonTarget(tc.eps, 1e-5, 1), sp, nil, privacy.DirectionStandard)
		if err != nil {
			t.Fatal(err)
		}
		g, err := privacy.CertifyCurve(GaussianClipSet(cal.Set.CMu, tc.v, L, P), privacy.CurveOptions{Direction: privacy.DirectionStandard, Releases: 1, Delta: 1e-5})
		if err != nil {
			t.Fatal(err)
		}
		if e := float64(g.Epsilon); e > tc.eps || math.Abs(e-tc.eps) > 1e-6*tc.eps || cal.Achieved != e {
			t.Errorf("epsilon target %v: C %v certifies %v (achieved %v)", tc.eps, cal.Set.CMu, e, cal.Achieved)
		}
		// the same epsilon from the closed form: a Gaussian mechanism of mu = 2 R sqrt(L) / sigma,
		// certified exactly; its RDP curve 2 order R^2 L / sigma^2 converts to more
		R, s2 := privacy.StoredRadius(cal.Set.CMu), math.Exp(float64(float32(math.Log(tc.v))))
		mu := 2 * R * math.Sqrt(L/s2)
		if e, err := privacy.GaussianMechanismEpsilon(mu, 1e-5); err != nil || g.Accountant != privacy.AccountantGaussian || math.Abs(e-float64(g.Epsilon)) > 1e-9*e {
			t.Errorf("closed-form epsilon %v, certified %v by %s (%v)", e, g.Epsilon, g.Accountant, err)
		}
		var curve []privacy.OrderRD
		for _, o := range privacy.DefaultOrders {
			curve = append(curve, privacy.OrderRD{Order: o, RD: jsonfloat.Float(2 * o * R * R * L / s2)})
		}
		if e, _, err := privacy.BestEpsilon(curve, 1e-5); err != nil || math.Abs(e-float64(g.RDPEpsilon)) > 1e-9*e || !(e > float64(g.Epsilon)) {
			t.Errorf("closed-form RDP epsilon %v, certified RDP %v, exact %v (%v)", e, g.RDPEpsilon, g.Epsilon, err)
		}
	}
	for _, tc := range []struct{ rd, order, v float64 }{{5, 1.1, 1}, {50, 2, 1}, {1, 8, 0.36}} {
		cal, err := privacy.Calibrate(GaussianClipSet(1, tc.v, L, P), privacy.RDTarget(tc.rd, tc.order, 1), sp, nil, privacy.DirectionStandard)
		if err != nil {
			t.Fatal(err)
		}
		s2 := math.Exp(float64(float32(math.Log(tc.v))))
		want := math.Sqrt(tc.rd * s2 / (2 * tc.order * L))
		if math.Abs(cal.Set.CMu-want) > 2e-7*want || cal.Achieved > tc.rd || math.Abs(cal.Achieved-tc.rd) > 1e-6*tc.rd {
			t.Errorf("RD %v at order %v: C %v (closed form %v), achieved %v", tc.rd, tc.order, cal.Set.CMu, want, cal.Achieved)
		}
	}
}

// TestGaussianAuditClosedForm: the posterior file of a gaussian model (3
// texts of different lengths, L = 6, P = 6, sigma^2 = 0.64) audited by
// audit.Audit has rd_max = max over ordered pairs of sum_i order
// ||mu_i - mu'_i||^2 / (2 sigma^2), computed directly from the stored means;
// every pair is finite, the Dirichlet and variance terms vanish; the file's
// metadata certifies the model's clip set.
func TestGaussianAuditClosedForm(t *testing.T) {
	const L, P, v, order = 6, 6, 0.64, 1.3
	m := gaussianModel(t, L, P, 0.9, v)
	in := encoder.Input{B: 3, S: 4, IDs: []int32{1, 2, 0, 0, 3, 4, 5, 6, 7, 0, 0, 0},
		Mask: []float32{1, 1, 0, 0, 1, 1, 1, 1, 1, 0, 0, 0}}
	post, err := m.Posterior(in)
	if err != nil {
		t.Fatal(err)
	}
	prior := m.Cfg.Prior
	prior.Mu = 0
	file, err := CollectPosteriors([]*Posterior{post}, prior, m.ExportMetadata("sst2", "dev"))
	if err != nil {
		t.Fatal(err)
	}
	ao := audit.DefaultOptions()
	ao.Order = order
	rep, err := audit.Audit(context.Background(), file, ao)
	if err != nil {
		t.Fatal(err)
	}
	s2 := math.Exp(float64(float32(math.Log(v))))
	want := 0.0
	N := L + 1
	for a := 0; a < 3; a++ {
		for b := 0; b < 3; b++ {
			if a == b {
				continue
			}
			var d float64
			for k := 0; k < N*P; k++ {
				e := float64(file.Mu[a*N*P+k]) - float64(file.Mu[b*N*P+k])
				d += order * e * e / (2 * s2)
			}
			pb, err := privacy.PairBound(order, file.View(a), file.View(b))
			if err != nil || math.Abs(pb.Total-d) > 1e-9*d+1e-12 || math.Abs(pb.DirichletTotal+pb.DirichletComponents) > 1e-12 {
				t.Errorf("pair (%d, %d): bound %v (Dirichlet %v + %v; %v), closed form %v", a, b, pb.Total, pb.DirichletTotal, pb.DirichletComponents, err, d)
			}
			want = math.Max(want, d)
		}
	}
	if rep.InvalidPairs != 0 || rep.Pairs != 6 || math.Abs(float64(rep.RDMax)-want) > 1e-9*want || !(want > 0) {
		t.Errorf("audit rd_max %v (invalid %d, pairs %d), closed form %v", rep.RDMax, rep.InvalidPairs, rep.Pairs, want)
	}
	set, ok, err := privacy.ClipSetFromMetadata(file)
	if err != nil || !ok {
		t.Fatalf("clip set from metadata: ok %v err %v", ok, err)
	}
	fromFile, err := privacy.Certify(set, order, privacy.DirectionStandard)
	if err != nil {
		t.Fatal(err)
	}
	wantCert := 2 * order * privacy.StoredRadius(0.9) * privacy.StoredRadius(0.9) * L / s2
	if math.Abs(float64(fromFile.RD)-wantCert) > 1e-9*wantCert || !(float64(rep.RDMax) <= float64(fromFile.RD)) {
		t.Errorf("file certificate %v, closed form %v, rd_max %v", fromFile.RD, wantCert, rep.RDMax)
	}
	if file.Metadata["model"] != ModelGaussian || file.Metadata["pads_released"] != "true" || file.PriorMu[0] != 0 {
		t.Errorf("metadata %v prior mu %v", file.Metadata, file.PriorMu[0])
	}
}

// TestGaussianConfigRoundTrip: a gaussian configuration survives
// SaveConfig/LoadConfig (release length, radius, noise variance); invalid
// gaussian configurations are refused with the field named.
func TestGaussianConfigRoundTrip(t *testing.T) {
	c := DefaultConfig(ModelGaussian, privacy.ModePrincipled, 16, 2, 32, 2)
	c.Clip.CMu, c.ReleaseLen, c.Prior.Var = 0.3372, 128, 0.81
	dir := t.TempDir()
	if err := SaveConfig(dir, c); err != nil {
		t.Fatal(err)
	}
	got, err := LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got != c {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, c)
	}
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"no release length", func(c *Config) { c.ReleaseLen = 0 }, "release_len"},
		{"zero radius", func(c *Config) { c.Clip.CMu = 0 }, "clip.c_mu"},
		{"reference mode", func(c *Config) { c.Mode = privacy.ModeReference }, "reference"},
		{"zero variance", func(c *Config) { c.Prior.Var = 0 }, "prior.var"},
	} {
		bad := c
		tc.mod(&bad)
		if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one naming %q", tc.name, err, tc.want)
		}
	}
}
