package privacy

import (
	"fmt"
	"math"

	"github.com/nvdp-project/nvdp/option"
)

// PosteriorView is one example's posterior: N components in P dimensions,
// component 0 being the prior component. Mu and Logvar are [N, P],
// row-major, and Alpha is [N]. AttentionMask is [N] or nil; as in Hugging
// Face's attention_mask, 1 is a real component and 0 padding.
type PosteriorView struct {
	N, P          int
	Mu            []float32 // [N, P]
	Logvar        []float32 // [N, P]; sigma = exp(Logvar/2)
	Alpha         []float32 // [N]
	AttentionMask []uint8   // [N] or nil; 1 = real component
}

func (v PosteriorView) check(name string) error {
	if v.N < 1 || v.P < 1 || len(v.Mu) != v.N*v.P || len(v.Logvar) != v.N*v.P || len(v.Alpha) != v.N || (v.AttentionMask != nil && len(v.AttentionMask) != v.N) {
		return fmt.Errorf("posterior %s: N=%d P=%d but len(mu)=%d len(logvar)=%d len(alpha)=%d len(attention_mask)=%d",
			name, v.N, v.P, len(v.Mu), len(v.Logvar), len(v.Alpha), len(v.AttentionMask))
	}
	return nil
}

// GaussianDirection selects the Gaussian term of the bound.
type GaussianDirection string

const (
	// DirectionPaper is Eq. rdp exactly as printed:
	//
	//	sigma'^2 = (1-lambda) sigma_{q'}^2 + lambda sigma_q^2
	//	log(sigma' / (sigma_{q'}^{1-lambda} sigma_q^lambda))
	//
	// That is the closed form of D_lambda(N_{q'} || N_q), while the Dirichlet part
	// is D_lambda(Dir_q || Dir_{q'}): the two halves of the printed bound point in
	// opposite directions. It is kept to compare with the paper and the PyTorch
	// peer.
	DirectionPaper GaussianDirection = "paper"
	// DirectionStandard uses D_lambda(N_q || N_{q'}) for the Gaussian part, so
	// that every term of the bound has the same direction q || q', after Gil et
	// al. 2013: sigma'^2 = lambda sigma_{q'}^2 + (1-lambda) sigma_q^2. It is the
	// principled default and the zero value; see docs/privacy.md.
	DirectionStandard GaussianDirection = "standard"
)

// BoundOptions are the choices of the principled bound.
type BoundOptions struct {
	// UseMask drops component i from a pair unless it is unpadded in both
	// examples, and sums each example's alpha_0 over its own unpadded
	// components (the release omits pads). This treats the length as public;
	// see docs/privacy.md ("--mask leaks length").
	UseMask bool
	// Direction of the Gaussian term; "" means DirectionStandard.
	Direction GaussianDirection
}

// BoundTerms is the paper's Eq. rdp for one ordered pair (q, q'), split into
// its three lines, in nats.
type BoundTerms struct {
	// DirichletTotal = -( lnG(lambda a0 - (lambda-1) a0') / (lambda-1) + lnG(a0') - lambda/(lambda-1) lnG(a0) )
	DirichletTotal float64
	// DirichletComponents = sum_i [ lnG(lambda a_i - (lambda-1) a'_i)/(lambda-1) + lnG(a'_i) - lambda/(lambda-1) lnG(a_i) ]
	DirichletComponents float64
	// Gaussian = sum_i [ lambda/2 ||(mu_i - mu'_i)/s_i||^2 + 1/(1-lambda) 1.log(s_i / ((sigma'_i)^{1-lambda} sigma_i^lambda)) ],
	// s_i^2 = (1-lambda) (sigma'_i)^2 + lambda sigma_i^2 (elementwise over the P dims; roles of q and q'
	// swapped under DirectionStandard)
	Gaussian float64
	// Total is the bound; +Inf when Undefined != "".
	Total float64
	// Undefined says why the bound does not exist for this pair (a radicand
	// or a Gamma argument <= 0), or is "".
	Undefined string
}

// PairBound returns the upper bound D_lambda(DP(q) || DP(q')) of the paper's
// Eq. rdp, section 3.1, with kappa_i = 1 and no mask, summed over all N
// components and all P dimensions. The Gaussian term is in the q || q'
// direction, [DirectionStandard]. order is the Renyi order lambda > 1.
//
// Where the bound is undefined, Total is +Inf and Undefined says why. It
// returns an error when order <= 1 or the shapes of q and qp differ.
func PairBound(order float64, q, qp PosteriorView) (BoundTerms, error) {
	return PairBoundWith(order, q, qp, BoundOptions{})
}

// PairBoundWith is [PairBound] with options: the mask and the Gaussian
// direction. It is the straightforward per-dimension evaluation that the
// audit's fast engine falls back on.
func PairBoundWith(order float64, q, qp PosteriorView, opt BoundOptions) (BoundTerms, error) {
	if err := CheckOrder(order); err != nil {
		return BoundTerms{}, err
	}
	if err := q.check("q"); err != nil {
		return BoundTerms{}, err
	}
	if err := qp.check("q'"); err != nil {
		return BoundTerms{}, err
	}
	if q.N != qp.N || q.P != qp.P {
		return BoundTerms{}, fmt.Errorf("posteriors q [%d %d] and q' [%d %d] differ in shape", q.N, q.P, qp.N, qp.P)
	}
	lam := order
	N, P := q.N, q.P
	kept := func(v PosteriorView, i int) bool {
		return !opt.UseMask || v.AttentionMask == nil || v.AttentionMask[i] == 1
	}
	var a0, b0 float64
	for i := 0; i < N; i++ {
		if kept(q, i) {
			a0 += float64(q.Alpha[i])
		}
		if kept(qp, i) {
			b0 += float64(qp.Alpha[i])
		}
	}
	var t BoundTerms
	undefined := func(format string, args ...any) (BoundTerms, error) {
		t.Undefined = fmt.Sprintf(format, args...)
		t.Total = math.Inf(1)
		return t, nil
	}
	g := lam*a0 - (lam-1)*b0
	if !(a0 > 0) || !(b0 > 0) || !(g > 0) {
		return undefined("%s", dirichletUndefined("total alpha0", a0, b0, g))
	}
	t.DirichletTotal = -(lgamma(g)/(lam-1) + lgamma(b0) - lam/(lam-1)*lgamma(a0))
	swap := opt.Direction != DirectionPaper
	for i := 0; i < N; i++ {
		if !kept(q, i) || !kept(qp, i) {
			continue
		}
		ai, bi := float64(q.Alpha[i]), float64(qp.Alpha[i])
		gi := lam*ai - (lam-1)*bi
		if !(ai > 0) || !(bi > 0) || !(gi > 0) {
			return undefined("component %d: %s", i, dirichletUndefined("alpha", ai, bi, gi))
		}
		t.DirichletComponents += lgamma(gi)/(lam-1) + lgamma(bi) - lam/(lam-1)*lgamma(ai)
		var quad, logs float64
		for j := i * P; j < (i+1)*P; j++ {
			d := float64(q.Mu[j]) - float64(qp.Mu[j])
			lq, lp := float64(q.Logvar[j]), float64(qp.Logvar[j])
			if swap {
				lq, lp = lp, lq
			}
			// sigma'^2 = (1-lambda) sigma_{q'}^2 + lambda sigma_q^2
			r := (1-lam)*math.Exp(lp) + lam*math.Exp(lq)
			if !(r > 0) {
				return undefined("component %d dim %d: sigma'^2 = (1-lambda) sigma'^2 + lambda sigma^2 = %g must be > 0", i, j-i*P, r)
			}
			quad += d * d / r
			// ln sigma' - (1-lambda) ln sigma_{q'} - lambda ln sigma_q
			logs += 0.5*math.Log(r) - (1-lam)*0.5*lp - lam*0.5*lq
		}
		t.Gaussian += lam/2*quad + logs/(1-lam)
	}
	t.Total = t.DirichletTotal + t.DirichletComponents + t.Gaussian
	if math.IsNaN(t.Total) || math.IsInf(t.Total, 0) {
		return undefined("bound overflows float64 (%g)", t.Total)
	}
	return t, nil
}

// dirichletUndefined says which condition of a Dirichlet term with
// pseudo-counts a (of q) and b (of q') fails, g = lambda a - (lambda-1) b:
// a pseudo-count that is not > 0 (lnGamma(0) = +Inf: the term does not
// exist), or g <= 0 (the Dirichlet of the tilted density does not exist).
func dirichletUndefined(name string, a, b, g float64) string {
	switch {
	case !(a > 0):
		return fmt.Sprintf("%s = %.7g of q is not > 0: lnGamma(%s) is undefined", name, a, name)
	case !(b > 0):
		return fmt.Sprintf("%s' = %.7g of q' is not > 0: lnGamma(%s') is undefined", name, b, name)
	}
	return fmt.Sprintf("lambda %s - (lambda-1) %s' = %.7g is not > 0 (%s = %.7g, %s' = %.7g)", name, name, g, name, a, name, b)
}

// DefaultOrder is the default Renyi order lambda of the bound, 1.1: the
// order of the paper's RD tables, of the clipping's sigma floor in package
// nvib, and of the audit.
const DefaultOrder = 1.1

// CheckOrder checks a Renyi order lambda of the paper's Eq. rdp. The bound,
// the certificate, the calibration and the audit's options check their
// orders with it.
//
// It returns nil when the order is finite and > 1, since the bound divides
// by lambda - 1, and otherwise the error "Renyi order lambda = <order>: must
// be finite and > 1".
func CheckOrder(order float64) error {
	if !(order > 1) || math.IsInf(order, 0) {
		return fmt.Errorf("Renyi order lambda = %v: must be finite and > 1", order)
	}
	return nil
}

// CheckDelta checks a delta of (epsilon, delta)-DP or of BDP's delta_mu. Every
// delta nvdp accepts is checked with it.
//
// It returns nil when delta is in (0, 1), and otherwise an [*option.Error] for
// the option "delta", reading "delta <value>: must be in (0, 1)", so that a
// program names its own flag for it.
func CheckDelta(delta float64) error {
	if !(delta > 0 && delta < 1) {
		return option.Errorf("delta", delta, "must be in (0, 1)")
	}
	return nil
}

// lgamma is ln|Gamma(x)| (the callers only pass x > 0).
func lgamma(x float64) float64 {
	v, _ := math.Lgamma(x)
	return v
}
