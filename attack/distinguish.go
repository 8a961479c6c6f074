package attack

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nvdp-project/nvdp/jsonfloat"
	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/progress"
)

// Defaults of DistinguishOptions.
const (
	// DefaultReleases is K, the releases drawn from each posterior. A threshold
	// test's bound is at most about ln(K/7.4), see [ThresholdBound.MaxDetectable],
	// which is 7.2 for 10,000.
	DefaultReleases = 10000
	// DefaultConfidence is the confidence of every Clopper-Pearson lower bound.
	DefaultConfidence = 0.95
	// DefaultSeed seeds the releases unless told otherwise.
	DefaultSeed = 1
)

// reportFPRs are the false-positive rates at which the true-positive rate of
// the likelihood-ratio test is reported, in DistinguishResult.TPRAtFPR.
var reportFPRs = []float64{1e-3, 1e-2}

// Methods of an epsilon lower bound (docs/attacks.md).
const (
	// MethodThreshold is the black-box bound of a threshold test on the scores,
	// after Jagielski et al. 2020 and Nasr et al. 2021. With TPR_lo the
	// Clopper-Pearson lower end of its true-positive rate and FPR_hi the upper
	// end of its false-positive rate, the release is not (eps, delta)-DP for any
	// eps < ln((TPR_lo - delta) / FPR_hi). It is valid whatever the score, and
	// cannot exceed about ln(K/7.4); see [ThresholdBound.MaxDetectable].
	MethodThreshold = "threshold"
	// MethodPrivacyLoss is the white-box bound that the exact density ratio
	// allows. For S_t = {L >= t}, P_q'(S_t) = E_q[1{L >= t} e^{-L}] <= e^{-t}
	// P_q(S_t). So with p_lo a one-sided Clopper-Pearson lower bound of P_q(S_t)
	// from releases of q alone, the release is not (eps, delta)-DP for any
	// eps < t + ln(1 - delta/p_lo). It is valid when [LogRatio] is the release's
	// true log density ratio, that is when the sampler and the density agree, as
	// TestLogRatioMonteCarlo checks. It is not capped by K.
	MethodPrivacyLoss = "privacy_loss"
)

// Directions of a test.
const (
	// DirectionQ calls a release one of q when its score L >= the threshold.
	DirectionQ = "q"
	// DirectionQPrime calls a release one of q' when -L >= the threshold: the
	// same test with the roles of q and q' exchanged.
	DirectionQPrime = "q_prime"
)

// selectionSplit says how the test behind every lower bound is chosen: on
// one half of the releases, with the bound computed on the other, so that
// the threshold does not depend on the releases that bound it. A threshold
// taken at an observed score makes that score's count no longer binomial,
// which a Bonferroni correction over observed thresholds does not repair.
const selectionSplit = "split: method, direction and threshold chosen on releases [0, K/2) of each posterior, the bound computed on releases [K/2, K)"

// DistinguishOptions are the options of [Distinguish]; see
// [DefaultDistinguishOptions].
type DistinguishOptions struct {
	// Releases is K, the releases drawn from each posterior of the pair (>= 2).
	Releases int `json:"releases"`
	// Delta is the delta of the (epsilon, delta) lower bound, in (0, 1).
	Delta float64 `json:"delta"`
	// Confidence of the lower bounds, in (0.5, 1).
	Confidence float64 `json:"confidence"`
	// Seed of the releases: release r of posterior s (0 = q, 1 = q') comes
	// from a PCG stream of (Seed, s, r / chunk), so the scores do not depend
	// on Workers.
	Seed uint64 `json:"seed"`
	// Workers is the number of goroutines drawing releases (0: GOMAXPROCS).
	Workers int `json:"-"`
	// Progress receives the releases drawn (stage "distinguish"); nil: none.
	Progress progress.Func `json:"-"`
}

// DefaultDistinguishOptions returns K = DefaultReleases, delta =
// privacy.DefaultDelta, DefaultConfidence, DefaultSeed, GOMAXPROCS workers.
func DefaultDistinguishOptions() DistinguishOptions {
	return DistinguishOptions{Releases: DefaultReleases, Delta: privacy.DefaultDelta, Confidence: DefaultConfidence, Seed: DefaultSeed}
}

// Validate reports the first invalid option as an [*option.Error] naming it
// by its JSON key. Releases whose scores cannot fit in memory are one.
func (o DistinguishOptions) Validate() error {
	switch {
	case o.Releases < 2:
		return option.Errorf("releases", o.Releases, "want >= 2 (half of them choose the test, half bound it)")
	case privacy.CheckDelta(o.Delta) != nil:
		return privacy.CheckDelta(o.Delta)
	case !(o.Confidence > 0.5 && o.Confidence < 1):
		return option.Errorf("confidence", o.Confidence, "want a value in (0.5, 1)")
	case o.Workers < 0:
		return option.Errorf("workers", o.Workers, "want >= 0 (0: GOMAXPROCS)")
	}
	return checkScoresMemory(o.Releases)
}

// DistinguishResult is the outcome of a distinguishing test on one pair, as
// JSON; see docs/attacks.md. Rates are fractions, and epsilons and
// divergences are in nats. Non-finite values are jsonfloat strings.
type DistinguishResult struct {
	Releases   int     `json:"releases"`
	Seed       uint64  `json:"seed"`
	Delta      float64 `json:"delta"`
	Confidence float64 `json:"confidence"`
	Selection  string  `json:"selection"`
	N          int     `json:"components"`
	P          int     `json:"dims"`
	// Gaussian: the release of a gaussian model (Z only).
	Gaussian bool `json:"gaussian_release"`
	// ExactRelease: the releases were drawn by the exact sampler on the
	// pair's lattice (a fixed-noise pair, as the release draws it: docs/
	// privacy.md "Floating-point safety"); false: by the floating-point
	// sampler. The test's score is the continuous log-likelihood ratio
	// either way (any score gives a valid lower bound).
	ExactRelease bool `json:"exact_release"`

	// KL is KL(q || q') and KLReverse KL(q' || q) (Pair.KL); LLRMeanQ and
	// LLRMeanQPrime the mean score of the releases of q and of q', which
	// estimate KL and -KLReverse.
	KL            jsonfloat.Float `json:"kl"`
	KLReverse     jsonfloat.Float `json:"kl_reverse"`
	LLRMeanQ      jsonfloat.Float `json:"llr_mean_q"`
	LLRMeanQPrime jsonfloat.Float `json:"llr_mean_q_prime"`
	// PairEpsilon is the (epsilon, delta) that the pair's own exact Renyi
	// curve implies (privacy.PairBound at every privacy.DefaultOrders, in
	// both directions, privacy.BestEpsilon): an upper bound on what any test
	// of this pair can show, at or below the certified epsilon. PairOrder
	// is its order.
	PairEpsilon jsonfloat.Float `json:"pair_epsilon_rdp"`
	PairOrder   jsonfloat.Float `json:"pair_order"`
	// GaussianMu and GaussianEpsilon, for a pair whose releases differ only
	// in their means (Pair.GaussianMu): the pair is the Gaussian mechanism
	// with sensitivity / sigma = mu, whose exact epsilon at Delta is
	// GaussianEpsilon (privacy.GaussianMechanismEpsilon; Balle & Wang 2018).
	GaussianMu      *jsonfloat.Float `json:"gaussian_mu,omitempty"`
	GaussianEpsilon *jsonfloat.Float `json:"gaussian_epsilon,omitempty"`

	// AUC, TPRAtFPR (at FPRs 1e-3 and 1e-2) and ROC describe the likelihood-ratio
	// test on all 2K releases (scores of q's releases positive); ROC is
	// thinned to the points at log-spaced false-positive rates.
	AUC      float64          `json:"auc"`
	TPRAtFPR []OperatingPoint `json:"tpr_at_fpr"`
	ROC      []ROCPoint       `json:"roc"`

	// EpsilonLowerBound is the bound of the test chosen on the selection
	// half among both methods (Method): with probability at least
	// Confidence over the releases, the release mechanism is not (eps,
	// Delta)-DP for any eps < EpsilonLowerBound (0: no evidence).
	EpsilonLowerBound jsonfloat.Float  `json:"epsilon_lower_bound"`
	Method            string           `json:"method"`
	ThresholdTest     ThresholdBound   `json:"threshold_test"`
	PrivacyLossTest   PrivacyLossBound `json:"privacy_loss_test"`

	// Certified is the certified guarantee at Delta (SetCertified); nil
	// when not known.
	Certified *CertifiedComparison `json:"certified,omitempty"`
	Seconds   float64              `json:"seconds"`
}

// OperatingPoint is the true-positive rate of a test at a false-positive rate.
type OperatingPoint struct {
	FPR float64 `json:"fpr"`
	TPR float64 `json:"tpr"`
}

// ThresholdBound is the [MethodThreshold] bound: the test, with its threshold
// and direction chosen on the selection half; its counts on the evaluation
// half, TP of Positives releases of the hypothesis called and FP of
// Negatives of the other; and their Clopper-Pearson intervals. The intervals
// are two-sided at the confidence C: the bound uses TPR's lower end and FPR's
// upper end, each one-sided at (1-C)/2, jointly C.
type ThresholdBound struct {
	Epsilon jsonfloat.Float `json:"epsilon"`
	// Estimate is ln((TPR - delta) / FPR) of the counts (+Inf when FP = 0).
	Estimate    jsonfloat.Float `json:"estimate"`
	Threshold   jsonfloat.Float `json:"threshold"`
	Direction   string          `json:"direction"`
	Positives   int             `json:"positives"`
	Negatives   int             `json:"negatives"`
	TP          int             `json:"tp"`
	FP          int             `json:"fp"`
	TPR         float64         `json:"tpr"`
	FPR         float64         `json:"fpr"`
	TPRInterval [2]float64      `json:"tpr_interval"`
	FPRInterval [2]float64      `json:"fpr_interval"`
	// MaxDetectable is the largest bound these counts could give (TP =
	// Positives, FP = 0): the attack's ceiling at this K.
	MaxDetectable jsonfloat.Float `json:"max_detectable"`
}

// PrivacyLossBound is the [MethodPrivacyLoss] bound. The threshold t and the
// direction are chosen on the selection half. On the evaluation half, Count
// of Releases releases of the hypothesis have a privacy loss >= t, where the
// loss is L, or -L for [DirectionQPrime]; ProbabilityLower is the one-sided
// Clopper-Pearson lower bound of that proportion at the confidence.
type PrivacyLossBound struct {
	Epsilon jsonfloat.Float `json:"epsilon"`
	// Estimate is t + ln(1 - delta/p) with p = Count/Releases.
	Estimate         jsonfloat.Float `json:"estimate"`
	Threshold        jsonfloat.Float `json:"threshold"`
	Direction        string          `json:"direction"`
	Releases         int             `json:"releases"`
	Count            int             `json:"count"`
	Probability      float64         `json:"probability"`
	ProbabilityLower float64         `json:"probability_lower"`
}

// CertifiedComparison is the certified guarantee of the release at the
// attack's delta, beside the attack's lower bound.
type CertifiedComparison struct {
	Epsilon jsonfloat.Float `json:"epsilon"`
	// Accountant is the guarantee's (privacy.Guarantee.Accountant); Order
	// the order of its RDP conversion.
	Accountant string          `json:"accountant,omitempty"`
	Order      jsonfloat.Float `json:"best_order"`
	Scope      string          `json:"scope,omitempty"`
	// Ratio is EpsilonLowerBound / Epsilon: the share of the certified
	// epsilon the attack demonstrates (<= 1 unless one of the two is wrong).
	Ratio jsonfloat.Float `json:"ratio"`
}

// SetCertified records g, the certified guarantee of one release, and the
// ratio of the lower bound to it. Errors: g is not at the result's delta,
// or covers more than one release.
func (r *DistinguishResult) SetCertified(g *privacy.Guarantee) error {
	if g.Delta != r.Delta {
		return fmt.Errorf("certified guarantee at delta %v, the attack's delta is %v", g.Delta, r.Delta)
	}
	if g.Releases != 1 {
		return fmt.Errorf("certified guarantee of %d releases; the attack tests one release", g.Releases)
	}
	r.Certified = &CertifiedComparison{Epsilon: g.Epsilon, Accountant: g.Accountant, Order: g.BestOrder, Scope: g.Scope,
		Ratio: jsonfloat.Float(float64(r.EpsilonLowerBound) / float64(g.Epsilon))}
	return nil
}

// Distinguish runs the distinguishing test of pair described in
// docs/attacks.md. It draws opt.Releases releases from each posterior with
// nvib's sampler, q's being the positives, and scores each by the exact
// log-likelihood ratio, [LogRatio]. It reports the ROC, the TPR at
// FPRs 1e-3 and 1e-2, and the epsilon lower bounds of both methods at opt.Delta,
// with the test chosen on one half of the releases and bounded on the other
// (docs/attacks.md). It takes memory for 2K scores, and time for about
// 2K N P Gaussian draws.
//
// It returns an error for invalid options, an [*option.Error]; a pair that
// [Pair.Check] rejects; a non-finite score; and cancellation.
func Distinguish(ctx context.Context, pair Pair, opt DistinguishOptions) (*DistinguishResult, error) {
	start := time.Now()
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	lr, err := NewLogRatio(pair)
	if err != nil {
		return nil, err
	}
	r := &DistinguishResult{Releases: opt.Releases, Seed: opt.Seed, Delta: opt.Delta, Confidence: opt.Confidence,
		Selection: selectionSplit, N: pair.Q.N, P: pair.Q.P, Gaussian: pair.Gaussian,
		KL: jsonfloat.Float(pair.KL()), KLReverse: jsonfloat.Float(pair.Swap().KL())}
	_, r.ExactRelease = exactLattice(pair)
	if err := r.pairBounds(pair); err != nil {
		return nil, err
	}
	scores, err := drawScores(ctx, pair, lr, opt)
	if err != nil {
		return nil, err
	}
	pos, neg := scores[0], scores[1]
	r.LLRMeanQ, r.LLRMeanQPrime = jsonfloat.Float(mean(pos)), jsonfloat.Float(mean(neg))
	roc, err := ROC(pos, neg)
	if err != nil {
		return nil, err
	}
	if r.AUC, err = AUC(pos, neg); err != nil {
		return nil, err
	}
	for _, f := range reportFPRs {
		r.TPRAtFPR = append(r.TPRAtFPR, OperatingPoint{FPR: f, TPR: tprAtFPR(roc, f)})
	}
	r.ROC = thinROC(roc, len(neg))
	h := opt.Releases / 2
	sel := [2][]float64{pos[:h], neg[:h]}
	eval := [2][]float64{pos[h:], neg[h:]}
	var selT, selL float64
	r.ThresholdTest, selT, err = thresholdTest(sel, eval, opt.Delta, opt.Confidence)
	if err != nil {
		return nil, err
	}
	r.PrivacyLossTest, selL, err = privacyLossTest(sel, eval, opt.Delta, opt.Confidence)
	if err != nil {
		return nil, err
	}
	r.EpsilonLowerBound, r.Method = r.ThresholdTest.Epsilon, MethodThreshold
	if selL > selT {
		r.EpsilonLowerBound, r.Method = r.PrivacyLossTest.Epsilon, MethodPrivacyLoss
	}
	r.Seconds = time.Since(start).Seconds()
	return r, nil
}

// pairBounds sets the pair's own upper bounds: its RDP epsilon and, for a
// mean-only pair, the Gaussian mechanism's exact epsilon.
func (r *DistinguishResult) pairBounds(pair Pair) error {
	best, bestOrder := math.Inf(1), math.NaN()
	for _, p := range []Pair{pair, pair.Swap()} {
		curve := make([]privacy.OrderRD, len(privacy.DefaultOrders))
		for i, o := range privacy.DefaultOrders {
			b, err := privacy.PairBound(o, p.Q, p.QPrime)
			if err != nil {
				return err
			}
			curve[i] = privacy.OrderRD{Order: o, RD: jsonfloat.Float(math.Max(0, b.Total))} // a divergence: >= 0 but for rounding
		}
		eps, order, err := privacy.BestEpsilon(curve, r.Delta)
		if err != nil {
			return err
		}
		if math.IsNaN(bestOrder) || eps > best {
			best, bestOrder = eps, order
		}
	}
	r.PairEpsilon, r.PairOrder = jsonfloat.Float(best), jsonfloat.Float(bestOrder)
	if mu, ok := pair.GaussianMu(); ok {
		eps, err := privacy.GaussianMechanismEpsilon(mu, r.Delta)
		if err != nil {
			return err
		}
		r.GaussianMu, r.GaussianEpsilon = jsonfloat.New(mu), jsonfloat.New(eps)
	}
	return nil
}

// chunk is the number of releases drawn from one random stream.
const chunk = 256

// drawScores draws opt.Releases releases of q (scores[0]) and of q'
// (scores[1]) and scores them by lr. Chunk c of posterior s is drawn from
// PCG(Seed, s<<32 | c), whatever the number of workers.
func drawScores(ctx context.Context, pair Pair, lr *LogRatio, opt DistinguishOptions) ([2][]float64, error) {
	K := opt.Releases
	scores := [2][]float64{make([]float64, K), make([]float64, K)}
	exact, _ := exactLattice(pair)
	samplers := [2]sampler{newSampler(pair.Q, pair.Gaussian, exact), newSampler(pair.QPrime, pair.Gaussian, exact)}
	chunks := (K + chunk - 1) / chunk
	jobs := make(chan [2]int)
	workers := opt.Workers
	if workers == 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	report := opt.Progress.Counter("distinguish", "releases", int64(2*K))
	var done atomic.Int64
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var firstErr error
	var errOnce sync.Once
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				s, c := j[0], j[1]
				rng := rand.New(rand.NewPCG(opt.Seed, uint64(s)<<32|uint64(c)))
				for i := c * chunk; i < min(K, (c+1)*chunk); i++ {
					z, logPi := samplers[s].draw(rng)
					v := lr.At(z, logPi)
					if math.IsNaN(v) {
						errOnce.Do(func() { firstErr = fmt.Errorf("release %d of posterior %d: NaN log-likelihood ratio", i, s); cancel() })
						break
					}
					scores[s][i] = v
				}
				report(done.Add(int64(min(K, (c+1)*chunk) - c*chunk)))
			}
		}()
	}
feed:
	for c := range chunks {
		for s := range 2 {
			select {
			case jobs <- [2]int{s, c}:
			case <-ctx.Done():
				break feed
			}
		}
	}
	close(jobs)
	wg.Wait()
	if firstErr != nil {
		return scores, firstErr
	}
	if err := ctx.Err(); err != nil {
		return scores, err
	}
	return scores, nil
}

// thresholdTest chooses, on the selection halves sel (sel[0] scores of q,
// sel[1] of q'), the direction and threshold of the best MethodThreshold
// bound, and bounds that test on eval. Returns the bound and its value on
// the selection half (-Inf: no test gave evidence).
func thresholdTest(sel, eval [2][]float64, delta, conf float64) (ThresholdBound, float64, error) {
	best, bestT, bestDir := math.Inf(-1), math.NaN(), DirectionQ
	for _, dir := range []string{DirectionQ, DirectionQPrime} {
		pos, neg := oriented(sel, dir)
		t, e, err := bestThreshold(pos, neg, delta, conf)
		if err != nil {
			return ThresholdBound{}, 0, err
		}
		if e > best {
			best, bestT, bestDir = e, t, dir
		}
	}
	pos, neg := oriented(eval, bestDir)
	b := ThresholdBound{Threshold: jsonfloat.Float(bestT), Direction: bestDir, Positives: len(pos), Negatives: len(neg)}
	if !math.IsNaN(bestT) {
		b.TP, b.FP = countAtLeast(pos, bestT), countAtLeast(neg, bestT)
	}
	eps, err := thresholdBound(b.TP, b.FP, len(pos), len(neg), delta, conf, &b.TPRInterval, &b.FPRInterval)
	if err != nil {
		return ThresholdBound{}, 0, err
	}
	b.TPR, b.FPR = float64(b.TP)/float64(len(pos)), float64(b.FP)/float64(len(neg))
	b.Epsilon = jsonfloat.Float(math.Max(0, eps))
	b.Estimate = jsonfloat.Float(math.Log((b.TPR - delta) / b.FPR))
	if math.IsNaN(float64(b.Estimate)) || b.TPR <= delta {
		b.Estimate = 0
	}
	var lo, hi [2]float64
	maxEps, err := thresholdBound(len(pos), 0, len(pos), len(neg), delta, conf, &lo, &hi)
	if err != nil {
		return ThresholdBound{}, 0, err
	}
	b.MaxDetectable = jsonfloat.Float(math.Max(0, maxEps))
	return b, best, nil
}

// privacyLossTest is thresholdTest for MethodPrivacyLoss: the bound uses
// the releases of the hypothesis called only.
func privacyLossTest(sel, eval [2][]float64, delta, conf float64) (PrivacyLossBound, float64, error) {
	best, bestT, bestDir := math.Inf(-1), math.NaN(), DirectionQ
	for _, dir := range []string{DirectionQ, DirectionQPrime} {
		pos, _ := oriented(sel, dir)
		t, e, err := bestLoss(pos, delta, conf)
		if err != nil {
			return PrivacyLossBound{}, 0, err
		}
		if e > best {
			best, bestT, bestDir = e, t, dir
		}
	}
	pos, _ := oriented(eval, bestDir)
	b := PrivacyLossBound{Threshold: jsonfloat.Float(bestT), Direction: bestDir, Releases: len(pos)}
	if !math.IsNaN(bestT) {
		b.Count = countAtLeast(pos, bestT)
	}
	b.Probability = float64(b.Count) / float64(len(pos))
	eps, lo, err := lossBound(b.Count, len(pos), bestT, delta, conf)
	if err != nil {
		return PrivacyLossBound{}, 0, err
	}
	b.ProbabilityLower = lo
	b.Epsilon = jsonfloat.Float(math.Max(0, eps))
	b.Estimate = 0
	if b.Probability > delta {
		b.Estimate = jsonfloat.Float(math.Max(0, bestT+math.Log1p(-delta/b.Probability)))
	}
	return b, best, nil
}

// oriented returns the scores of a test in direction dir: the positives (the
// hypothesis called) and the negatives, each a score that is large for the
// positives: (L of q's releases, L of the releases of q') for DirectionQ,
// (-L of the releases of q', -L of q's) for DirectionQPrime.
func oriented(s [2][]float64, dir string) (pos, neg []float64) {
	if dir == DirectionQ {
		return s[0], s[1]
	}
	return negated(s[1]), negated(s[0])
}

func negated(v []float64) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = -x
	}
	return out
}

// bestThreshold is the threshold t of the test "score >= t" on (pos, neg)
// with the best MethodThreshold bound at counts selectionSD standard
// deviations worse than observed (worse: a threshold in the far tail, whose
// counts on the other half are likely worse, is not preferred), and that bound (-Inf,
// NaN: none gives evidence). t is midway between the lowest score called
// positive and the next lower score. For each number of false positives
// only the threshold with the most true positives is a candidate, and the
// search stops once ln(1/FPR_hi) (what any later threshold can reach) is
// below the best.
func bestThreshold(pos, neg []float64, delta, conf float64) (t, eps float64, err error) {
	roc, err := ROC(pos, neg)
	if err != nil {
		return 0, 0, err
	}
	eps, t = math.Inf(-1), math.NaN()
	var lo, hi [2]float64
	for i := 1; i < len(roc); i++ {
		p := roc[i]
		if i+1 < len(roc) && roc[i+1].FP == p.FP {
			continue
		}
		tp, fp := worse(p.TP, len(pos), -1), worse(p.FP, len(neg), +1)
		if _, fprHi, err := clopperPearson(fp, len(neg), conf); err != nil {
			return 0, 0, err
		} else if -math.Log(fprHi) <= eps {
			break
		}
		e, err := thresholdBound(tp, fp, len(pos), len(neg), delta, conf, &lo, &hi)
		if err != nil {
			return 0, 0, err
		}
		if e > eps {
			eps, t = e, p.Threshold
			if i+1 < len(roc) {
				t = (p.Threshold + roc[i+1].Threshold) / 2
			}
		}
	}
	return t, eps, nil
}

// selectionSD is how many standard deviations worse than observed the
// counts of a candidate test are taken when the test is chosen (worse).
const selectionSD = 3

// worse is the count k of n selectionSD standard deviations (sqrt(k + 1),
// Poisson) lower (sign -1) or higher (+1), within [0, n]: a test chosen on
// one half is then likely to keep its evidence on the other.
func worse(k, n, sign int) int {
	w := float64(k) + float64(sign)*selectionSD*math.Sqrt(float64(k+1))
	if sign < 0 {
		return max(0, int(math.Floor(w)))
	}
	return min(n, int(math.Ceil(w)))
}

// thresholdBound is ln((TPR_lo - delta) / FPR_hi) of tp of nPos and fp of
// nNeg (-Inf when TPR_lo <= delta), with the two-sided Clopper-Pearson
// intervals at conf written to tpr and fpr.
func thresholdBound(tp, fp, nPos, nNeg int, delta, conf float64, tpr, fpr *[2]float64) (float64, error) {
	var err error
	if tpr[0], tpr[1], err = clopperPearson(tp, nPos, conf); err != nil {
		return 0, err
	}
	if fpr[0], fpr[1], err = clopperPearson(fp, nNeg, conf); err != nil {
		return 0, err
	}
	if tpr[0] <= delta {
		return math.Inf(-1), nil
	}
	return math.Log((tpr[0] - delta) / fpr[1]), nil
}

// bestLoss is the threshold t, an observed loss, with the best
// MethodPrivacyLoss bound of the losses pos at a count selectionSD standard
// deviations lower than observed (as bestThreshold), and that bound (-Inf, NaN: none
// gives evidence). The bound is below t, so the search (t decreasing) stops
// once t is below the best.
func bestLoss(pos []float64, delta, conf float64) (t, eps float64, err error) {
	s := append([]float64(nil), pos...)
	sort.Sort(sort.Reverse(sort.Float64Slice(s)))
	eps, t = math.Inf(-1), math.NaN()
	for i, v := range s {
		if i+1 < len(s) && s[i+1] == v {
			continue
		}
		if v <= eps {
			break
		}
		e, _, err := lossBound(worse(i+1, len(s), -1), len(s), v, delta, conf)
		if err != nil {
			return 0, 0, err
		}
		if e > eps {
			eps, t = e, v
		}
	}
	return t, eps, nil
}

// lossBound is t + ln(1 - delta/p_lo) for k of n releases with a loss >= t,
// p_lo the one-sided Clopper-Pearson lower bound at conf (the lower end of
// the two-sided interval at 2 conf - 1); -Inf when p_lo <= delta or t is
// NaN (no test).
func lossBound(k, n int, t, delta, conf float64) (eps, lo float64, err error) {
	if lo, _, err = clopperPearson(k, n, 2*conf-1); err != nil {
		return 0, 0, err
	}
	if lo <= delta || math.IsNaN(t) {
		return math.Inf(-1), lo, nil
	}
	return t + math.Log1p(-delta/lo), lo, nil
}

func countAtLeast(v []float64, t float64) int {
	n := 0
	for _, x := range v {
		if x >= t {
			n++
		}
	}
	return n
}

func mean(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// rocPoints is the number of log-spaced false-positive rates thinROC keeps.
const rocPoints = 200

// thinROC keeps, of a ROC over nNeg negatives (ROC's order), the point of
// the highest TPR at FPR 0 and at each of rocPoints false-positive rates
// log-spaced from 1/nNeg to 1 the point of the highest TPR at or below that
// rate, without duplicates and without ROC's first point (threshold +Inf,
// which JSON cannot hold).
func thinROC(roc []ROCPoint, nNeg int) []ROCPoint {
	var out []ROCPoint
	lo := math.Log(1 / float64(nNeg))
	i := 0
	for g := -1; g < rocPoints; g++ {
		f := 0.0
		if g >= 0 {
			f = math.Exp(lo * (1 - float64(g)/float64(rocPoints-1)))
		}
		for i+1 < len(roc) && roc[i+1].FPR <= f*(1+1e-12) {
			i++
		}
		if i > 0 && (len(out) == 0 || roc[i] != out[len(out)-1]) {
			out = append(out, roc[i])
		}
	}
	return out
}
