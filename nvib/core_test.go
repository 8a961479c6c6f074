package nvib

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/nvdp-project/nvdp/nn/nntest"
	"github.com/nvdp-project/nvdp/privacy"
	"gonum.org/v1/gonum/mathext"
)

func TestClipMuVectors(t *testing.T) {
	for _, tc := range []struct {
		in, want []float32
		c        float64
		active   bool
	}{
		{[]float32{3, 4}, []float32{1.2, 1.6}, 2, true},
		{[]float32{0.3, 0.4}, []float32{0.3, 0.4}, 2, false},
		{[]float32{float32(math.Inf(1)), 0, float32(math.Inf(-1))}, []float32{float32(math.Sqrt2), 0, -float32(math.Sqrt2)}, 2, true},
		{[]float32{math.MaxFloat32, math.MaxFloat32}, []float32{float32(math.Sqrt2), float32(math.Sqrt2)}, 2, true},
	} {
		mu := append([]float32(nil), tc.in...)
		_, act := ClipMu(mu, nil, tc.c)
		if act != tc.active {
			t.Errorf("ClipMu(%v): active %v", tc.in, act)
		}
		for j := range mu {
			if math.Abs(float64(mu[j]-tc.want[j])) > 1e-6 {
				t.Errorf("ClipMu(%v, %v) = %v, want %v", tc.in, tc.c, mu, tc.want)
				break
			}
		}
	}
	// around a non-zero centre
	mu := []float32{4, 1}
	ClipMu(mu, []float32{1, 1}, 2)
	if mu[0] != 3 || mu[1] != 1 {
		t.Errorf("ClipMu around (1,1): %v, want [3 1]", mu)
	}
}

func TestLogvarFloorVector(t *testing.T) {
	ref := DefaultClip(privacy.ModeReference, 8, 1.5)
	f, c := ref.LogvarBounds(1)
	if math.Abs(f-(-2.3978952728)) > 1e-10 || !math.IsInf(c, 1) {
		t.Errorf("reference logvar bounds (%v, %v), want (-2.3978952728, +Inf)", f, c)
	}
	if s := math.Exp(f / 2); math.Abs(s-0.3015113446) > 1e-10 {
		t.Errorf("sigma_min %v", s)
	}
	pr := DefaultClip(privacy.ModePrincipled, 8, 1.5)
	f, c = pr.LogvarBounds(2)
	if math.Abs(f-(math.Log(2/11.0)+DefaultLogvarMargin)) > 1e-12 || math.Abs(c-math.Log(2)) > 1e-12 {
		t.Errorf("principled logvar bounds (%v, %v)", f, c)
	}
	if err := pr.GuaranteesFiniteBound(); err != nil {
		t.Errorf("principled defaults: %v", err)
	}
	if err := ref.GuaranteesFiniteBound(); err == nil {
		t.Errorf("reference clipping claimed to guarantee a finite bound")
	}
	if want := 0.1 / 1.1 * 1.5 * 1.001; math.Abs(pr.CAlphaMin-want) > 1e-15 {
		t.Errorf("principled C_amin %v, want %v", pr.CAlphaMin, want)
	}
}

// TestClipGradient checks the clipped (mu, logvar, alpha) gradients with
// finite differences, with some rows inside and some outside every bound.
func TestClipGradient(t *testing.T) {
	for _, mode := range []privacy.Mode{privacy.ModePrincipled, privacy.ModeReference} {
		rng := rand.New(rand.NewPCG(1, 2))
		B, N, P := 2, 4, 5
		cfg := DefaultClip(mode, 2, 0.8)
		prior := Prior{Mu: 0.3, Var: 1.5, LogAlpha: 0}
		mu := nntest.RandTensor(rng, B, N, P)
		lv := nntest.RandTensor(rng, B, N, P)
		la := nntest.RandTensor(rng, B, N)
		for i := range mu.Data {
			mu.Data[i] *= 1.3
			lv.Data[i] = lv.Data[i]*1.5 - 0.5
		}
		wm, wl, wa := nntest.RandTensor(rng, B, N, P), nntest.RandTensor(rng, B, N, P), nntest.RandTensor(rng, B, N)
		loss := func() float64 {
			m, l := mu.Clone(), lv.Clone()
			a, _ := clipPosterior(cfg, prior, m.Data, l.Data, la.Data, B, N, P)
			var s float64
			for i := range m.Data {
				s += float64(wm.Data[i])*float64(m.Data[i]) + float64(wl.Data[i])*float64(l.Data[i])
			}
			for i := range a {
				s += float64(wa.Data[i]) * float64(a[i])
			}
			return s
		}
		m, l := mu.Clone(), lv.Clone()
		_, c := clipPosterior(cfg, prior, m.Data, l.Data, la.Data, B, N, P)
		dm, dl := wm.Clone(), wl.Clone()
		dla := c.backward(dm.Data, dl.Data, wa.Clone().Data)
		var nproj, nfloor, ncap, nalpha int
		for r := range c.muNorm {
			if c.muNorm[r] > 0 {
				nproj++
			}
			if !c.aPass[r] {
				nalpha++
			}
		}
		fl, cp := cfg.LogvarBounds(prior.Var)
		for i, v := range l.Data {
			if !c.lvPass[i] && float64(v) < fl+1e-6 {
				nfloor++
			} else if !c.lvPass[i] && float64(v) > cp-1e-6 {
				ncap++
			}
		}
		if nproj == 0 || nfloor == 0 || nalpha == 0 || (mode == privacy.ModePrincipled && ncap == 0) {
			t.Fatalf("%s: test data does not exercise every bound: proj %d floor %d cap %d alpha %d", mode, nproj, nfloor, ncap, nalpha)
		}
		opts := nntest.GradOpts{Eps: 1e-3}
		nntest.CheckGradStrict(t, string(mode)+" dmu", loss, mu.Data, dm.Data, opts)
		nntest.CheckGradStrict(t, string(mode)+" dlogvar", loss, lv.Data, dl.Data, opts)
		nntest.CheckGradStrict(t, string(mode)+" dlogalpha", loss, la.Data, dla, opts)
		// the prior row: clipped only in reference mode
		if mode == privacy.ModePrincipled && c.muNorm[0] != 0 {
			t.Errorf("principled: prior row clipped")
		}
	}
}

func TestSampleGammaMoments(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, a := range []float64{0.05, 0.3, 1, 2.5, 40} {
		const n = 40000
		var s, s2, l, l2 float64
		for i := 0; i < n; i++ {
			lg := SampleLogGamma(rng, a)
			g := math.Exp(lg)
			s += g
			s2 += g * g
			l += lg
			l2 += lg * lg
		}
		mean := s / n
		// E g = a (Var a), E ln g = psi(a), Var ln g = psi'(a)
		if math.Abs(mean-a) > 5*math.Sqrt(a/n) {
			t.Errorf("Gamma(%v): mean %v", a, mean)
		}
		lm, lv := l/n, l2/n-(l/n)*(l/n)
		if math.Abs(lm-mathext.Digamma(a)) > 5*math.Sqrt(Trigamma(a)/n) {
			t.Errorf("Gamma(%v): E ln g = %v, want %v", a, lm, mathext.Digamma(a))
		}
		if math.Abs(lv-Trigamma(a))/Trigamma(a) > 0.05 {
			t.Errorf("Gamma(%v): Var ln g = %v, want %v", a, lv, Trigamma(a))
		}
	}
}

// TestGammaLogGradImplicit checks d ln g/da against the derivative of the
// quantile function at fixed u = P(a, g): g(a') = P^{-1}(a', u).
func TestGammaLogGradImplicit(t *testing.T) {
	for _, a := range []float64{1e-3, 0.05, 0.3, 0.9, 1, 1.7, 5, 30} {
		for _, u := range []float64{1e-6, 0.01, 0.2, 0.5, 0.8, 0.99, 0.999999} {
			g := mathext.GammaIncRegInv(a, u)
			if !(g > 0) || math.IsInf(g, 0) {
				continue
			}
			h := 1e-5 * a
			gp, gm := mathext.GammaIncRegInv(a+h, u), mathext.GammaIncRegInv(a-h, u)
			num := (math.Log(gp) - math.Log(gm)) / (2 * h)
			ana := GammaLogGrad(a, math.Log(g))
			if math.Abs(num-ana) > 1e-4*math.Abs(num)+1e-6 {
				t.Errorf("a=%v u=%v g=%v: d ln g/da analytic %v, numeric %v", a, u, g, ana, num)
			}
		}
	}
	// extreme lower tail: series in log space stays finite, asymptote -(ln x - psi(a+1))/a
	a, lx := 1e-3, -5000.0
	got := GammaLogGrad(a, lx)
	want := -(lx - mathext.Digamma(a+1)) / a
	if math.Abs(got-want) > 1e-6*math.Abs(want) {
		t.Errorf("tail: %v, want %v", got, want)
	}
}

// TestGammaGradUnbiased: E[dg/da] = d E[g]/da = 1 (Monte Carlo, 5 standard errors).
func TestGammaGradUnbiased(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, a := range []float64{0.1, 0.7, 2, 9} {
		const n = 20000
		var s, s2 float64
		for i := 0; i < n; i++ {
			lg := SampleLogGamma(rng, a)
			d := math.Exp(lg) * GammaLogGrad(a, lg)
			s += d
			s2 += d * d
		}
		m := s / n
		se := math.Sqrt((s2/n - m*m) / n)
		if math.Abs(m-1) > 5*se || se > 0.05 {
			t.Errorf("a=%v: E[dg/da] = %v ± %v, want 1", a, m, se)
		}
	}
}

func TestTrigamma(t *testing.T) {
	for _, tc := range []struct{ x, want float64 }{
		{1, math.Pi * math.Pi / 6}, {0.5, math.Pi * math.Pi / 2}, {0.01, 10001.6212135283}, {20, 0.051270822935203},
	} {
		if got := Trigamma(tc.x); math.Abs(got-tc.want) > 1e-9*tc.want {
			t.Errorf("Trigamma(%v) = %.15g, want %.15g", tc.x, got, tc.want)
		}
	}
}

// TestDirichletGradient: finite differences through the whole Dirichlet path
// (guards, implicit Gamma gradient, normalisation) with the Gamma samples held
// at fixed quantiles u_k (g_k = P^{-1}(a_k, u_k): exactly the implicit
// reparameterisation), including the proportion floor and a masked component.
func TestDirichletGradient(t *testing.T) {
	B, N := 2, 5
	alpha := []float32{0.7, 0.3, 1.2, 0.05, 2, 1.1, 0.4, 1e-30, 0.9, 3}
	mask := []float32{1, 1, 1, 1, 0, 1, 1, 1, 1, 1}
	w := []float64{0.3, -1, 0.5, 2, 7, -0.2, 0.8, 0.1, -0.6, 1.1}
	u := []float64{0.3, 0.9, 0.5, 0.05, 0.5, 0.7, 0.2, 0.5, 0.999, 0.01}
	quant := func(k int, a float64) float64 {
		if a < 1e-10 {
			return -1e6 // far lower tail: pi = 0 to double precision
		}
		return math.Log(mathext.GammaIncRegInv(a, u[k]))
	}
	loss := func() float64 {
		d := sampleDirichlet(quant, alpha, mask, B, N, true)
		var s float64
		for i, lp := range d.LogPi {
			if !math.IsInf(lp, -1) {
				s += w[i] * math.Exp(lp) // loss on pi itself
			}
		}
		return s
	}
	d := sampleDirichlet(quant, alpha, mask, B, N, true)
	if d.Pi[4] != 0 || !math.IsInf(d.LogPi[4], -1) {
		t.Errorf("masked component: pi %v ln pi %v", d.Pi[4], d.LogPi[4])
	}
	for b := 0; b < B; b++ {
		var s float64
		for i := 0; i < N; i++ {
			s += float64(d.Pi[b*N+i])
		}
		if math.Abs(s-1) > 1e-6 {
			t.Errorf("example %d: sum pi = %v", b, s)
		}
	}
	dl := make([]float64, B*N)
	for i := range dl {
		if !math.IsInf(d.LogPi[i], -1) {
			dl[i] = w[i] * math.Exp(d.LogPi[i])
		}
	}
	ana := d.Backward(dl)
	// floored component: its gradient is 0 to first order except via A; check by FD on the rest
	x := alpha
	num := nntest.NumericGrad(loss, x, []int{0, 1, 2, 3, 5, 6, 8, 9}, 1e-4)
	for n, i := range []int{0, 1, 2, 3, 5, 6, 8, 9} {
		if math.Abs(num[n]-float64(ana[i])) > 2e-3*math.Abs(num[n])+1e-4 {
			t.Errorf("dalpha[%d]: analytic %v, numeric %v", i, ana[i], num[n])
		}
	}
	if ana[4] != 0 {
		t.Errorf("masked gradient %v", ana[4])
	}
}

func TestKLReferenceVector(t *testing.T) {
	mu := []float32{0, 0, 1.0, 0.5, 0.2, -0.3}
	sig := []float64{1, 1, 0.5, 0.6, 0.4, 0.4}
	lv := make([]float32, 6)
	for i, s := range sig {
		lv[i] = float32(math.Log(s * s))
	}
	alpha := []float32{0.7, 0.5, 0.3}
	for _, cfg := range []KLConfig{{Prior: DefaultPrior()}, {Prior: DefaultPrior(), MaskPads: true}} {
		r := KL(cfg, mu, lv, alpha, []float32{1, 1, 1}, 1, 3, 2)
		if math.Abs(r.LG[0]-0.2947536138) > 1e-7 || math.Abs(r.LD[0]-0.0394616248) > 1e-9 {
			t.Errorf("e0 (mask %v): L_G %.10f L_D %.10f, want 0.2947536138 0.0394616248", cfg.MaskPads, r.LG[0], r.LD[0])
		}
	}
	// masking: a padding component changes the reference value but not the principled one
	mu2 := append(append([]float32(nil), mu...), 2, 2)
	lv2 := append(append([]float32(nil), lv...), -1, -1)
	a2 := append(append([]float32(nil), alpha...), 0.9)
	m2 := []float32{1, 1, 1, 0}
	if r := KL(KLConfig{Prior: DefaultPrior(), MaskPads: true}, mu2, lv2, a2, m2, 1, 4, 2); math.Abs(r.LG[0]-0.2947536138) > 1e-7 || math.Abs(r.LD[0]-0.0394616248) > 1e-9 {
		t.Errorf("principled with a pad: %v %v", r.LG[0], r.LD[0])
	}
	if r := KL(KLConfig{Prior: DefaultPrior()}, mu2, lv2, a2, m2, 1, 4, 2); math.Abs(r.LG[0]-0.2947536138) < 1e-3 {
		t.Errorf("reference ignored the pad component: %v", r.LG[0])
	}
}

func TestKLGradient(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	B, N, P := 3, 4, 3
	for _, cfg := range []KLConfig{{Prior: Prior{Mu: 0.2, Var: 1.3, LogAlpha: 0.4}, Delta: 0.5, MaskPads: true}, {Prior: DefaultPrior()}} {
		mu := nntest.RandTensor(rng, B, N, P)
		lv := nntest.RandTensor(rng, B, N, P)
		alpha := make([]float32, B*N)
		for i := range alpha {
			alpha[i] = float32(0.1 + 2*rng.Float64())
		}
		mask := []float32{1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 0, 0}
		wG, wD := 0.7, 1.9
		loss := func() float64 {
			r := KL(cfg, mu.Data, lv.Data, alpha, mask, B, N, P)
			return wG*r.MeanLG + wD*r.MeanLD
		}
		dm, dl, da := make([]float32, B*N*P), make([]float32, B*N*P), make([]float32, B*N)
		KLBackward(cfg, mu.Data, lv.Data, alpha, mask, B, N, P, wG, wD, dm, dl, da)
		o := nntest.GradOpts{Eps: 1e-3}
		nntest.CheckGradStrict(t, "KL dmu", loss, mu.Data, dm, o)
		nntest.CheckGradStrict(t, "KL dlogvar", loss, lv.Data, dl, o)
		nntest.CheckGradStrict(t, "KL dalpha", loss, alpha, da, o)
	}
}

// TestDrawWeightsSameAsSample: a release's weights, drawn without the Gamma
// gradients, are those of SampleDirichlet from the same stream, bit for bit,
// across the floor, Marsaglia-Tsang's shape < 1 branch and the total cap.
func TestDrawWeightsSameAsSample(t *testing.T) {
	for _, alpha := range [][]float32{
		{1, 2, 3, 0.5, 1e-6, 7},
		{0.3, 0.999, 1, 1.001, 40, 2},
		{5000, 1, 2, 3000, 0.01, 1e4},
	} {
		for seed := uint64(1); seed <= 5; seed++ {
			pi, logPi := DrawWeights(alpha, rand.New(rand.NewPCG(seed, 9)))
			d := SampleDirichlet(rand.New(rand.NewPCG(seed, 9)), alpha, nil, 1, len(alpha))
			for i := range alpha {
				if math.Float32bits(pi[i]) != math.Float32bits(d.Pi[i]) || math.Float64bits(logPi[i]) != math.Float64bits(d.LogPi[i]) {
					t.Fatalf("alpha %v, seed %d, component %d: DrawWeights %v (%v), SampleDirichlet %v (%v)", alpha, seed, i, pi[i], logPi[i], d.Pi[i], d.LogPi[i])
				}
			}
		}
	}
}
