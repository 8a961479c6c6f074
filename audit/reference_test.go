package audit

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/privacy/privacytest"
)

// refVectors is the batch of ref §11: B=4, N=3, P=2 (mu; sigma; alpha).
func refVectors() *privacy.Posteriors {
	mu := [][]float32{
		{0, 0, 1.0, 0.5, 0.2, -0.3},
		{0, 0, 0.8, 0.1, -0.5, 0.4},
		{0, 0, 0.3, 0.9, 0, 0},
		{0, 0, 1.2, -0.7, 0.6, 0.6},
	}
	sig := [][]float64{
		{1, 1, 0.5, 0.6, 0.4, 0.4},
		{1, 1, 0.45, 0.5, 0.6, 0.35},
		{1, 1, 0.5, 0.5, 0.5, 0.5},
		{1, 1, 0.35, 0.7, 0.5, 0.45},
	}
	al := [][]float32{{0.7, 0.5, 0.3}, {0.7, 0.6, 0.2}, {0.7, 0.4, 0.00005}, {0.7, 0.7, 0.7}}
	p := privacy.NewPosteriors(4, 3, 2)
	for x := range 4 {
		copy(p.Mu[x*6:], mu[x])
		copy(p.Alpha[x*3:], al[x])
		for j, s := range sig[x] {
			p.Logvar[x*6+j] = float32(2 * math.Log(s))
		}
	}
	return p
}

func TestReferenceRDVectors(t *testing.T) {
	p := refVectors()
	cases := []struct {
		a, b           int
		rd, f1, f2, f3 float64
	}{
		{0, 1, 0.702888, 0, 0, 0.702888},
		{0, 2, 0.351375, -0.030966, 0.056809, 0.325532},
		{0, 3, 1.043099, -0.053820, 0.091894, 1.005024},
		{1, 2, 0.611816, -0.030966, 0.057154, 0.585629},
		{1, 3, 0.756268, -0.053820, 0.092511, 0.717576},
		{2, 3, 1.711218, -0.198012, 0.278859, 1.630370},
	}
	var v []float64
	for _, c := range cases {
		rd, f1, f2, f3 := refPairRD(1.1, p.View(c.a), p.View(c.b))
		// The vectors have 6 decimals: tolerance 1e-4 relative or 2e-6 absolute.
		for _, x := range []struct {
			n         string
			got, want float64
		}{{"rd", rd, c.rd}, {"F1", f1, c.f1}, {"F2", f2, c.f2}, {"F3", f3, c.f3}} {
			if math.Abs(x.got-x.want) > math.Max(1e-4*math.Abs(x.want), 2e-6) {
				t.Errorf("pair (%d,%d) %s = %.7f, want %.6f", c.a, c.b, x.n, x.got, x.want)
			}
		}
		v = append(v, rd)
	}
	bmax, bmean := refZFilter(v)
	privacytest.RelClose(t, "batch_max", bmax, 1.0430987, 1e-5)
	privacytest.RelClose(t, "batch_mean", bmean, 0.4170424, 1e-5)
}

func TestReferenceAccountantVectors(t *testing.T) {
	p := refVectors()
	rb := newRefBatch(p, 0, 4)
	privacytest.RelClose(t, "sR", rb.sR, 0.70, 1e-8) // sigmas stored as float32 logvar
	privacytest.RelClose(t, "sL", rb.sL, 1, 1e-15)
	want := []float64{0.003237, 0.003171, 0.005881, 0.003947, 0.005199, 0.01075}
	var lm []float64
	k := 0
	for a := range 4 {
		for b := a + 1; b < 4; b++ {
			got := rb.refLogMGF(a, b, 0.1, 3, 2)
			if math.Abs(got-want[k]) > 1e-3*want[k]+5e-7 {
				t.Errorf("logmgf(%d,%d) = %.7f, want %.6f", a, b, got, want[k])
			}
			lm = append(lm, got)
			k++
		}
	}
	cost, err := refBatchCost(lm, defaultConfidence)
	if err != nil {
		t.Fatal(err)
	}
	privacytest.RelClose(t, "cost q=0.1", cost, 1.350333, 1e-5)
	eps, _ := refEpsilon(cost, 1, 1e-5, defaultConfidence)
	privacytest.RelClose(t, "eps q=0.1", eps, 11.693871, 1e-6)

	lm = lm[:0]
	for a := range 4 {
		for b := a + 1; b < 4; b++ {
			lm = append(lm, rb.refLogMGF(a, b, 16.0/1725, 3, 2))
		}
	}
	cost, _ = refBatchCost(lm, defaultConfidence)
	privacytest.RelClose(t, "cost q=16/1725", cost, 0.0242966, 1e-5)
	eps, _ = refEpsilon(cost, 1, 1e-5, defaultConfidence)
	privacytest.RelClose(t, "eps q=16/1725", eps, 10.488384, 1e-6)

	// Homogeneous: every pair s2 = 0.5 -> std 0 path, 108 batches.
	q := 16.0 / 1725
	c1 := math.Log(1 - q*q + q*q*math.Exp(0.5))
	same := make([]float64, 120)
	for i := range same {
		same[i] = c1
	}
	hc, _ := refBatchCost(same, defaultConfidence)
	privacytest.RelClose(t, "homogeneous batch cost", hc, 5.58095e-5, 1e-5)
	eps, _ = refEpsilon(108*hc, 108, 1e-5, defaultConfidence)
	privacytest.RelClose(t, "eps homogeneous", eps, 10.471775, 1e-6)
	floor, _ := refEpsilon(0, 1, 1e-5, defaultConfidence)
	privacytest.RelClose(t, "floor", floor, 10.4662959, 1e-7)

	if _, err := refBatchCost(lm[:2], defaultConfidence); err == nil {
		t.Error("batch cost with 2 pairs accepted")
	}
}

func TestReferenceAudit(t *testing.T) {
	p := refVectors()
	r, err := Audit(context.Background(), p, opts(func(o *Options) { o.Mode, o.BatchSize, o.Q = privacy.ModeReference, 16, 0.1 }))
	if err != nil {
		t.Fatal(err)
	}
	privacytest.RelClose(t, "rd_max", float64(r.RDMax), 1.0430987, 1e-5)
	privacytest.RelClose(t, "rd_mean", float64(*r.RDMean), 0.4170424, 1e-5)
	privacytest.RelClose(t, "rd_max_unfiltered", float64(*r.RDMaxUnfiltered), 1.711218, 1e-5)
	privacytest.RelClose(t, "bdp", float64(*r.BDPEpsilon), 11.693871, 1e-5)
	if r.Pairs != 6 || r.Batches != 1 {
		t.Errorf("pairs %d batches %d", r.Pairs, r.Batches)
	}
	// Default q = batch/M = 16/4 > 1 is rejected.
	if _, err := Audit(context.Background(), p, opts(func(o *Options) { o.Mode = privacy.ModeReference })); err == nil {
		t.Error("q = 4 accepted")
	}
}

// Two batches: results combine as the released code (max of batch maxima,
// mean of batch means, costs summed, gamma = 1 - conf^T).
func TestReferenceBatches(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	p := privacytest.RandomPosteriors(rng, 9, 4, 5, 0.3)
	r, err := Audit(context.Background(), p, opts(func(o *Options) { o.Mode, o.BatchSize, o.Q = privacy.ModeReference, 4, 0.05 }))
	if err != nil {
		t.Fatal(err)
	}
	// Batches: [0,4), [4,8), [8,9) (one example: no pair).
	var maxes, means []float64
	var C float64
	for _, s := range []int{0, 4} {
		var v, lm []float64
		rb := newRefBatch(p, s, s+4)
		for a := s; a < s+4; a++ {
			for b := a + 1; b < s+4; b++ {
				rd, _, _, _ := refPairRD(1.1, p.View(a), p.View(b))
				v = append(v, rd)
				lm = append(lm, rb.refLogMGF(a-s, b-s, 0.05, 4, 5))
			}
		}
		m, mean := refZFilter(v)
		maxes, means = append(maxes, m), append(means, mean)
		c, _ := refBatchCost(lm, defaultConfidence)
		C += c
	}
	privacytest.RelClose(t, "rd_max", float64(r.RDMax), math.Max(maxes[0], maxes[1]), 1e-12)
	privacytest.RelClose(t, "rd_mean", float64(*r.RDMean), (means[0]+means[1])/2, 1e-12)
	eps, _ := refEpsilon(C, 2, 1e-5, defaultConfidence)
	privacytest.RelClose(t, "bdp", float64(*r.BDPEpsilon), eps, 1e-12)
	if r.Batches != 3 || len(r.SkippedBatches) != 1 || r.Pairs != 12 {
		t.Errorf("batches %d skipped %v pairs %d", r.Batches, r.SkippedBatches, r.Pairs)
	}
}

func TestStudentTUpper(t *testing.T) {
	tail := 1 - defaultConfidence
	if tail != 1.1102230246251565e-16 {
		t.Fatalf("tail = %v", tail)
	}
	cases := []struct {
		df, want, tol float64
	}{
		{2, 6.7108864e7, 1e-7}, {5, 2434.29, 2e-6}, {6, 819.99, 1e-5}, {7, 382.10, 2e-5},
		{12, 61.59, 1e-4}, {20, 24.47, 2e-4}, {27, 17.69, 3e-4}, {77, 10.43, 5e-4},
		{119, 9.5465, 1e-5}, {495, 8.50, 6e-4},
	}
	for _, c := range cases {
		got, err := StudentTUpper(c.df, tail)
		if err != nil {
			t.Fatal(err)
		}
		privacytest.RelClose(t, "t quantile", got, c.want, c.tol)
	}
	// Closed forms: df=1 (Cauchy) t = tan(pi (1/2 - p)); df=2: t = (1-2p)/sqrt(2p(1-p)).
	for _, p := range []float64{0.25, 0.05, 1e-3, 1e-9, 1e-16} {
		got, _ := StudentTUpper(1, p)
		privacytest.RelClose(t, "cauchy", got, 1/math.Tan(math.Pi*p), 1e-9)
		got, _ = StudentTUpper(2, p)
		privacytest.RelClose(t, "df2", got, (1-2*p)/math.Sqrt(2*p*(1-p)), 1e-9)
	}
	if _, err := StudentTUpper(0, 0.1); err == nil {
		t.Error("df 0 accepted")
	}
	if _, err := StudentTUpper(3, 0.7); err == nil {
		t.Error("tail 0.7 accepted")
	}
}
