package release

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/privacy"
)

// The floating-point attack of issue 37 (Mironov, CCS 2012; Jin et al., IEEE S&P 2022), as an attacker
// who knows two candidate texts' exact means would run it, on the main job's shape: N = 65, P = 128,
// sigma = 1, every row in the ball of radius 0.493.
const (
	attackN, attackP = 65, 128
	attackRadius     = 0.493
)

// attackPair returns the posteriors of two texts with known exact means: rows at random points of
// the ball of radius attackRadius (component 0 the prior's 0), logvar 0, alpha 1 (a gaussian
// release's posterior, nvib.GaussianClipSet).
func attackPair(seed uint64) [2]*nvib.Posterior {
	rng := rand.New(rand.NewPCG(seed, 1))
	var out [2]*nvib.Posterior
	for t := range out {
		mu := make([]float32, attackN*attackP)
		for i := 1; i < attackN; i++ {
			row := mu[i*attackP : (i+1)*attackP]
			var n2 float64
			v := make([]float64, attackP)
			for j := range v {
				v[j] = rng.NormFloat64()
				n2 += v[j] * v[j]
			}
			r := attackRadius * math.Pow(rng.Float64(), 1/float64(attackP)) / math.Sqrt(n2) * 0.999
			for j := range row {
				row[j] = float32(v[j] * r)
			}
		}
		lv, al := make([]float32, attackN*attackP), make([]float32, attackN)
		for i := range al {
			al[i] = nvib.GaussianAlpha
		}
		out[t] = &nvib.Posterior{B: 1, N: attackN, P: attackP, PadsReleased: true, Mu: nn.FromData(mu, 1, attackN, attackP),
			Logvar: nn.FromData(lv, 1, attackN, attackP), Alpha: nn.FromData(al, 1, attackN)}
	}
	return out
}

// zigguratGrid reads the ziggurat's layer widths wn of math/rand/v2's NormFloat64 from the Go
// sources: on its fast path (over 99% of draws) and every slow-path draw but the base strip's tail
// (|e| > 3.44), it returns float64(j) * wn[i] for an int32 j and i < 128.
func zigguratGrid(t *testing.T) []float64 {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(runtime.GOROOT(), "src", "math", "rand", "v2", "normal.go"))
	if err != nil {
		t.Skipf("the Go sources of math/rand/v2 are not installed: %v", err)
	}
	m := regexp.MustCompile(`(?s)var wn = \[128\]float32\{(.*?)\}`).FindSubmatch(src)
	if m == nil {
		t.Fatal("no wn table in math/rand/v2/normal.go")
	}
	var wn []float64
	for _, f := range strings.FieldsFunc(string(m[1]), func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\t' }) {
		v, err := strconv.ParseFloat(f, 32)
		if err != nil {
			t.Fatalf("wn entry %q: %v", f, err)
		}
		wn = append(wn, float64(float32(v)))
	}
	if len(wn) != 128 {
		t.Fatalf("wn has %d entries", len(wn))
	}
	return wn
}

// floatCanProduce reports whether the floating-point sampler (float32(float64(mu) + e), sigma 1,
// e = NormFloat64()) can output z for the mean mu, |z - mu| < 3.4: whether some grid point
// e = j wn[i] rounds to it. Neighbours of the nearest j are tried too, so a false is certain.
func floatCanProduce(z, mu float32, wn []float64) bool {
	for _, w := range wn {
		j0 := math.Round((float64(z) - float64(mu)) / w)
		for j := j0 - 2; j <= j0+2; j++ {
			if float32(float64(mu)+j*w) == z {
				return true
			}
		}
	}
	return false
}

// nearZero is the |z| below which the attack tests a coordinate: there float32 is finer than the
// ziggurat's grid, so a value shows the grid point that produced it.
const nearZero = 2e-4

// The attack on today's floating-point sampler (nvib.DrawGaussian): over 200 releases of text A,
// about 30% contain a coordinate that text B cannot produce (a certain distinction), and none
// contains one its own text cannot (the check is sound). This is the defect the exact release removes.
func TestFloatSamplerIsDistinguishable(t *testing.T) {
	if testing.Short() {
		t.Skip("200 releases")
	}
	wn := zigguratGrid(t)
	pair := attackPair(1)
	rng := rand.New(rand.NewPCG(2, 3))
	const K = 200
	caught := 0
	for range K {
		z := nvib.DrawGaussian(pair[0], rng).Z.Data
		impossible := false
		for k, v := range z {
			if math.Abs(float64(v)) >= nearZero {
				continue
			}
			if !floatCanProduce(v, pair[0].Mu.Data[k], wn) {
				t.Fatalf("value %v at %d: the check says its own mean %v cannot produce it", v, k, pair[0].Mu.Data[k])
			}
			if !floatCanProduce(v, pair[1].Mu.Data[k], wn) {
				impossible = true
			}
		}
		if impossible {
			caught++
		}
	}
	t.Logf("float sampler: %d of %d releases of A hold a value B cannot produce", caught, K)
	if caught < K/5 {
		t.Errorf("float sampler: only %d of %d releases caught; the attack should catch about 30%%", caught, K)
	}
}

// The same attack on the exact release: every value of every release of either text lies on the
// lattice, so it has positive probability under both texts (the lattice noise takes every integer);
// and the exact log-likelihood ratio of the releases, log P_A(z) - P_B(z) computed with the lattice
// noise's probabilities P(n = j) = Phi((j+1/2)G/sigma') - Phi((j-1/2)G/sigma'), has the mean and
// variance of the certified Gaussian mechanism's privacy loss, mu^2/2 and mu^2 with mu = ||G (m_A -
// m_B)||/sigma' (5 standard errors).
func TestExactReleaseResistsTheAttack(t *testing.T) {
	if testing.Short() {
		t.Skip("400 releases")
	}
	wn := zigguratGrid(t)
	set := nvib.GaussianClipSet(attackRadius, 1, attackN-1, attackP)
	e, err := newExact(set, true)
	if err != nil {
		t.Fatal(err)
	}
	pair := attackPair(1)
	G, s := e.lat.G(), e.lat.Sigma
	var m [2][]int64
	for t2 := range pair {
		m[t2] = make([]int64, attackN*attackP)
		for k, v := range pair[t2].Mu.Data {
			m[t2][k], _ = e.lat.MeanIndex(v, 0)
		}
	}
	var mu2 float64
	for k := range m[0] {
		d := float64(m[0][k]-m[1][k]) * G / s
		mu2 += d * d
	}
	// logP is log P(n = j): the tail mass between (|j|-1/2)G/s and (|j|+1/2)G/s, from erfc (no cancellation).
	logP := func(j int64) float64 {
		a := math.Abs(float64(j))
		if a == 0 {
			return math.Log(math.Erf(0.5 * G / s / math.Sqrt2))
		}
		lo, hi := (a-0.5)*G/s/math.Sqrt2, (a+0.5)*G/s/math.Sqrt2
		return math.Log(0.5 * (math.Erfc(lo) - math.Erfc(hi)))
	}
	const K = 200
	for from := range 2 {
		src := NewSeededSource(uint64(40 + from))
		var sum, sum2 float64
		floatCaught := 0
		for range K {
			d, err := src.exactDraw(t.Context(), e)
			if err != nil {
				t.Fatal(err)
			}
			rel, err := e.apply(pair[from], d)
			d.wipe()
			if err != nil {
				t.Fatal(err)
			}
			var llr float64
			for k, z := range rel.Z {
				q := float64(z) / G
				if q != math.Trunc(q) {
					t.Fatalf("text %d: z = %v is off the lattice: impossible under the exact mechanism", from, z)
				}
				// under either text the noise is the integer n = z/G - m: every integer has positive probability
				llr += logP(int64(q)-m[0][k]) - logP(int64(q)-m[1][k])
				if math.Abs(float64(z)) < nearZero && !floatCanProduce(z, pair[1-from].Mu.Data[k], wn) {
					floatCaught++ // what the float attack would conclude: it assumes the float sampler
				}
			}
			if from == 1 {
				llr = -llr
			}
			sum += llr
			sum2 += llr * llr
		}
		mean, v := sum/K, sum2/K-(sum/K)*(sum/K)
		want := mu2 / 2
		if se := math.Sqrt(mu2 / K); math.Abs(mean-want) > 5*se {
			t.Errorf("releases of text %d: mean privacy loss %.3f, the Gaussian mechanism's mu^2/2 = %.3f (se %.3f)", from, mean, want, se)
		}
		if se := mu2 * math.Sqrt(2.0/K); math.Abs(v-mu2) > 5*se {
			t.Errorf("releases of text %d: privacy-loss variance %.3f, want mu^2 = %.3f (se %.3f)", from, v, mu2, se)
		}
		t.Logf("text %d: mean privacy loss %.3f (mu^2/2 %.3f), variance %.3f (mu^2 %.3f); the float attack's test fires on %d values, all lattice points",
			from, mean, want, v, mu2, floatCaught)
	}
	if got, _ := set.GaussianMu(); math.Abs(got-2*privacy.StoredRadius(attackRadius)*8) > 1e-9 {
		t.Errorf("the clip set's mu %v", got)
	}
}
