// Package privacytest holds what the tests of privacy and audit share:
// random posteriors around the clipping region (RandomPosteriors), an
// independent transcription of the paper's Eq. rdp (NaiveRD), the posterior
// files of the reader's error table (FileCases) and RelClose.
package privacytest

import (
	"bytes"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/safetensors"
)

// RandomPosteriors draws posteriors around the clipping region: sigma in
// [sigmaLo, 1], alpha in [0.1, 1], |mu| < 1, prior component at index 0.
func RandomPosteriors(rng *rand.Rand, m, n, p int, sigmaLo float64) *privacy.Posteriors {
	po := privacy.NewPosteriors(m, n, p)
	for x := range m {
		for i := range n {
			c := x*n + i
			po.Alpha[c] = float32(0.1 + 0.9*rng.Float64())
			if i == 0 {
				po.Alpha[c] = 1
			}
			for j := range p {
				k := c*p + j
				if i == 0 {
					continue // mu 0, logvar 0
				}
				po.Mu[k] = float32(rng.NormFloat64() * 0.4)
				s := sigmaLo + (1-sigmaLo)*rng.Float64()
				po.Logvar[k] = float32(2 * math.Log(s))
			}
		}
	}
	return po
}

// NaiveRD is an independent float64 transcription of the paper's Eq. rdp,
// with kappa = 1, for the ordered pair (q, q'), with the Gaussian term as
// printed. With useMask, a component counts if it is unpadded in both, and
// the totals run over each one's unpadded components. With swap[0] true the
// Gaussian term swaps sigma and sigma', which is the standard direction,
// privacy.DirectionStandard. It returns +Inf where a log-gamma argument or a
// radicand is <= 0.
func NaiveRD(lam float64, p *privacy.Posteriors, q, qp int, useMask bool, swap ...bool) float64 {
	N, P := p.N, p.P
	on := func(x, i int) bool { return !useMask || p.AttentionMask == nil || p.AttentionMask[x*N+i] == 1 }
	lg := func(x float64) float64 {
		if x <= 0 {
			return math.NaN()
		}
		v, _ := math.Lgamma(x)
		return v
	}
	var A, Ap float64
	for i := range N {
		if on(q, i) {
			A += float64(p.Alpha[q*N+i])
		}
		if on(qp, i) {
			Ap += float64(p.Alpha[qp*N+i])
		}
	}
	total := -(1/(lam-1)*lg(lam*A-(lam-1)*Ap) + lg(Ap) - lam/(lam-1)*lg(A))
	for i := range N {
		if !on(q, i) || !on(qp, i) {
			continue
		}
		a, ap := float64(p.Alpha[q*N+i]), float64(p.Alpha[qp*N+i])
		total += 1/(lam-1)*lg(lam*a-(lam-1)*ap) + lg(ap) - lam/(lam-1)*lg(a)
		var sq, lt float64
		for j := range P {
			k := (q*N+i)*P + j
			kp := (qp*N+i)*P + j
			sig := math.Sqrt(math.Exp(float64(p.Logvar[k])))
			sigp := math.Sqrt(math.Exp(float64(p.Logvar[kp])))
			if len(swap) > 0 && swap[0] {
				sig, sigp = sigp, sig
			}
			sprime := math.Sqrt((1-lam)*sigp*sigp + lam*sig*sig)
			z := (float64(p.Mu[k]) - float64(p.Mu[kp])) / sprime
			sq += z * z
			lt += math.Log(sprime / (math.Pow(sigp, 1-lam) * math.Pow(sig, lam)))
		}
		total += lam/2*sq + 1/(1-lam)*lt
	}
	if math.IsNaN(total) {
		return math.Inf(1)
	}
	return total
}

// RelClose reports an error on t, named name, unless got is within tol of
// want, relatively.
func RelClose(t *testing.T, name string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol*math.Max(math.Abs(want), 1e-300) {
		t.Errorf("%s = %.10g, want %.10g (rel err %.2e > %.0e)", name, got, want, math.Abs(got-want)/math.Abs(want), tol)
	}
}

// FileCase is a posterior file in memory and the error it must give, or ""
// for a good file.
type FileCase struct {
	Name string
	Data []byte
	Want string
}

// FileCases returns the bad posterior files of privacy's
// TestPosteriorFileErrors, which are also the seeds of FuzzParsePosteriors
// and of audit's FuzzAuditPosteriors, then good ones.
func FileCases(tb testing.TB) []FileCase {
	good := privacy.NewPosteriors(2, 3, 4)
	for i := range good.Alpha {
		good.Alpha[i] = 0.5
	}
	file := func(ts []*safetensors.Tensor, md map[string]string) []byte {
		var b bytes.Buffer
		if err := safetensors.Write(&b, ts, md); err != nil {
			tb.Fatal(err)
		}
		return b.Bytes()
	}
	std := func(mu, lv, al []float32, muShape, lvShape, alShape []int) []*safetensors.Tensor {
		return []*safetensors.Tensor{
			safetensors.FromFloat32("mu", muShape, mu),
			safetensors.FromFloat32("logvar", lvShape, lv),
			safetensors.FromFloat32("alpha", alShape, al),
		}
	}
	with := func(v []float32, k int, x float32) []float32 {
		v = slices.Clone(v)
		v[k] = x
		return v
	}
	md := map[string]string{"prior_mu": "0", "prior_var": "1"}
	s3, s34 := []int{2, 3, 4}, []int{2, 3}
	ok := std(good.Mu, good.Logvar, good.Alpha, s3, s3, s34)
	okFile := file(ok, md)
	return []FileCase{
		{"truncated", okFile[:len(okFile)-3], "truncated"},
		{"nan", file(std(with(good.Mu, 7, float32(math.NaN())), good.Logvar, good.Alpha, s3, s3, s34), md), "tensor mu: non-finite value NaN at [example 0, component 1, dim 3]"},
		{"inf logvar", file(std(good.Mu, with(good.Logvar, 0, float32(math.Inf(1))), good.Alpha, s3, s3, s34), md), "tensor logvar: non-finite"},
		{"logvar overflows exp", file(std(good.Mu, with(good.Logvar, 13, 1000), good.Alpha, s3, s3, s34), md), "tensor logvar: value 1000 at [example 1, component 0, dim 1]"},
		{"logvar underflows exp", file(std(good.Mu, with(good.Logvar, 13, -800), good.Alpha, s3, s3, s34), md), "tensor logvar: value -800 at [example 1, component 0, dim 1]"},
		{"negative alpha", file(std(good.Mu, good.Logvar, with(good.Alpha, 4, -0.1), s3, s3, s34), md), "tensor alpha: negative pseudo-count -0.1 at [example 1, component 1]"},
		{"shape mismatch", file(std(good.Mu, good.Logvar, good.Alpha[:4], s3, s3, []int{2, 2}), md), "tensor alpha: shape [2 2]"},
		{"logvar shape", file(std(good.Mu, good.Logvar, good.Alpha, s3, []int{2, 4, 3}, s34), md), "tensor logvar: shape [2 4 3]"},
		{"missing alpha", file(ok[:2], md), "tensor alpha missing"},
		{"missing prior", file(ok, map[string]string{"prior_mu": "0"}), "metadata prior_var missing"},
		{"prior length", file(ok, map[string]string{"prior_mu": "[0,0]", "prior_var": "1"}), "prior_mu: 2 values, want P = 4"},
		{"prior var 0", file(ok, map[string]string{"prior_mu": "0", "prior_var": "0"}), "prior_var 0"},
		{"null in prior_mu", file(ok, map[string]string{"prior_mu": "[0, null, 0, 0]", "prior_var": "1"}), "metadata prior_mu: dim 1 is null"},
		{"null in prior_var", file(ok, map[string]string{"prior_mu": "0", "prior_var": "[1, 1, 1, null]"}), "metadata prior_var: dim 3 is null"},
		{"prior not a number", file(ok, map[string]string{"prior_mu": "zero", "prior_var": "1"}), `metadata prior_mu: "zero" is neither`},
		{"mask shape", file(append(slices.Clone(ok), safetensors.FromUint8("attention_mask", []int{3}, []uint8{1, 1, 1})), md), "tensor attention_mask: shape [3]"},
		{"mask value", file(append(slices.Clone(ok), safetensors.FromUint8("attention_mask", s34, []uint8{1, 2, 1, 1, 1, 1})), md), "tensor attention_mask: value 2"},
		// the prior component is always real: a 0 there is a mask of the other convention
		{"mask prior padded", file(append(slices.Clone(ok), safetensors.FromUint8("attention_mask", s34, []uint8{1, 1, 0, 0, 1, 1})), md), "tensor attention_mask: the prior component is marked padding at [example 1, component 0]"},
		// files of the old convention (tensor "mask", 1 = padding) are refused, never misread
		{"old mask convention", file(append(slices.Clone(ok), safetensors.FromUint8("mask", s34, []uint8{0, 0, 1, 0, 0, 0})), md), "tensor mask: the file uses the old mask convention (1 = padding component)"},
		{"f64 mu", file([]*safetensors.Tensor{safetensors.FromFloat64("mu", s3, make([]float64, 24))}, md), "tensor mu: dtype F64, want F32"},
		{"empty", nil, "safetensors"},
		{"good", okFile, ""},
		{"good, mu 1e20", file(std(with(good.Mu, 0, 1e20), good.Logvar, good.Alpha, s3, s3, s34), md), ""},
		{"good, mask and prior arrays", file(append(slices.Clone(ok), safetensors.FromUint8("attention_mask", s34, []uint8{1, 0, 0, 1, 1, 0})),
			map[string]string{"prior_mu": "[0, 0.5, 0, -1]", "prior_var": "[1, 2, 1, 0.5]"}), ""},
	}
}

// MaskedFile writes into dir the masked posteriors that the memory-map tests
// share: 17 examples by 3 components by 7 dims, with every other pair of
// components padding. It returns the file's path, the file read into memory
// with privacy.ReadPosteriors, and the file memory-mapped with
// privacy.MapPosteriors, which is unmapped when the test ends.
func MaskedFile(t *testing.T, dir string) (path string, read, mapped *privacy.Posteriors) {
	t.Helper()
	p := RandomPosteriors(rand.New(rand.NewPCG(29, 30)), 17, 3, 7, 0.3)
	p.AttentionMask = make([]uint8, p.M*p.N)
	for k := range p.AttentionMask {
		p.AttentionMask[k] = uint8(1 - (k%p.N)/2)
	}
	path = filepath.Join(dir, "p.safetensors")
	if err := privacy.WritePosteriors(path, p); err != nil {
		t.Fatal(err)
	}
	read, err := privacy.ReadPosteriors(path)
	if err != nil {
		t.Fatal(err)
	}
	mapped, unmap, err := privacy.MapPosteriors(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := unmap(); err != nil {
			t.Error(err)
		}
	})
	return path, read, mapped
}
