package audit

import (
	"context"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/privacy"
)

// synthClipSet is the clip set synthPosteriors draws inside (lambda = 1.1:
// sigma in [1.05 sqrt(0.1/1.1), 1], alpha in [0.12/1.1, 1], ||mu|| <= 3,
// standard normal prior, prior alpha 1): the certified bound is finite
// below Renyi order 1.111 (MaxOrder), so of the default BDP grid only the
// moment orders 0.05 and 0.1 are certified finite.
func synthClipSet(n, p int) privacy.ClipSet {
	lam := 1.1
	sigLo := 1.05 * math.Sqrt((lam-1)/lam)
	return privacy.ClipSet{Components: n, Dims: p, CMu: 3, PriorMu: []float64{0}, PriorVar: []float64{1},
		LogvarFloor: []float64{2 * math.Log(sigLo)}, LogvarCap: []float64{0},
		AlphaMin: 1.2 * (lam - 1) / lam, AlphaMax: 1, PriorAlpha: 1}
}

// TestAuditCertifiedSkip: with the clip set, the orders it certifies +Inf
// are skipped and reported +Inf; everything else is the full audit's, bit
// for bit; on these posteriors the full audit finds those orders +Inf too,
// so bdp_epsilon and its order are unchanged.
func TestAuditCertifiedSkip(t *testing.T) {
	p := synthPosteriors(40, 5, 16, 3)
	set := synthClipSet(p.N, p.P)
	if mo := set.MaxOrder(); !(mo > 1.1 && mo < 1.5) {
		t.Fatalf("clip set max order %v, want in (1.1, 1.5)", mo)
	}
	// One worker: the sums in a fixed order, so the reports compare bit for
	// bit (with more, tiles meet the workers in an order that varies).
	for _, workers := range []int{1} {
		full := DefaultOptions()
		full.Workers = workers
		skip := full
		skip.Certified = &set
		rf, rs := mustAudit(t, p, full), mustAudit(t, p, skip)
		wantSkipped := map[float64]bool{0.5: true, 1.1: true, 2: true}
		for k, bo := range rs.BDPOrders {
			fo := rf.BDPOrders[k]
			if (bo.Skipped != "") != wantSkipped[bo.Order] {
				t.Fatalf("order %v: skipped %q, want skipped %v", bo.Order, bo.Skipped, wantSkipped[bo.Order])
			}
			if bo.Skipped == "" {
				if !reflect.DeepEqual(bo, fo) {
					t.Errorf("order %v: with the clip set %+v, without %+v", bo.Order, bo, fo)
				}
				continue
			}
			if !strings.Contains(bo.Skipped, "certified bound +Inf") {
				t.Errorf("order %v: reason %q", bo.Order, bo.Skipped)
			}
			for _, v := range []float64{float64(*bo.Cost), float64(*bo.Epsilon), float64(*bo.EpsPooled), float64(*fo.Cost), float64(*fo.EpsPooled)} {
				if !math.IsInf(v, 1) {
					t.Errorf("order %v: skipped cost/epsilon %v %v, full audit %v %v: want +Inf", bo.Order, *bo.Cost, *bo.Epsilon, *fo.Cost, *fo.EpsPooled)
				}
			}
			if fo.InfPairs == 0 {
				t.Errorf("order %v: the full audit found no undefined pair", bo.Order)
			}
		}
		rs.BDPOrders, rf.BDPOrders = nil, nil
		if len(rs.Notes) != len(rf.Notes)+1 {
			t.Errorf("notes %q, want those of the full audit %q and one on the skipped orders", rs.Notes, rf.Notes)
		}
		rs.Notes, rf.Notes = nil, nil
		if !reflect.DeepEqual(rs, rf) {
			t.Errorf("workers %d: report with the clip set\n%+v\nwithout\n%+v", workers, rs, rf)
		}
	}
}

// TestAuditCertifiedErrors: a clip set of another shape, an invalid one, or
// one given to the reference mode is an error before any work.
func TestAuditCertifiedErrors(t *testing.T) {
	p := synthPosteriors(5, 3, 4, 1)
	bad := synthClipSet(3, 4)
	bad.AlphaMin = -1
	ref := DefaultOptions()
	ref.Mode = privacy.ModeReference
	for _, c := range []struct {
		name string
		set  privacy.ClipSet
		opt  Options
		want string
	}{
		{"shape", synthClipSet(3, 5), DefaultOptions(), "the posteriors have N = 3, P = 4"},
		{"invalid", bad, DefaultOptions(), "c_alpha_min -1: clip set: C_amin must be finite and >= 0"},
		{"reference", synthClipSet(3, 4), ref, "principled mode only"},
	} {
		c.opt.Certified = &c.set
		if _, err := Audit(context.Background(), p, c.opt); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		}
	}
}

// mustAudit is Audit of p with opt, failing t on an error, with Seconds 0
// (reports of the same numbers compare equal).
func mustAudit(t *testing.T, p *privacy.Posteriors, opt Options) *Report {
	t.Helper()
	r, err := Audit(context.Background(), p, opt)
	if err != nil {
		t.Fatal(err)
	}
	r.Seconds = 0
	return r
}
