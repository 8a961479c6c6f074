package attack

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/privacy"
)

// randomPosteriors is a file of m posteriors of [N 3, P 2].
func randomPosteriors(m int) *privacy.Posteriors {
	rng := rand.New(rand.NewPCG(4, 4))
	p := privacy.NewPosteriors(m, 3, 2)
	for k := range p.Mu {
		p.Mu[k] = float32(rng.NormFloat64())
		p.Logvar[k] = float32(-0.5 * rng.Float64())
	}
	for k := range p.Alpha {
		p.Alpha[k] = float32(0.5 + rng.Float64())
	}
	return p
}

// TestCandidates: each kind of pair of a posterior file is the pair it
// names, with where it comes from; what cannot be a pair is an
// *option.Error naming the option at fault.
func TestCandidates(t *testing.T) {
	ctx := context.Background()
	six, two := randomPosteriors(6), randomPosteriors(2)
	for _, tc := range []struct {
		name  string
		spec  PairSpec
		p     *privacy.Posteriors
		index [][]int // the candidates' indices
		opt   string  // the option of the error ("": none)
	}{
		{"witness file", PairSpec{Kind: PairWitness}, two, [][]int{{0, 1}}, ""},
		{"not a witness file", PairSpec{Kind: PairWitness}, six, nil, "posteriors"},
		{"index", PairSpec{Kind: PairIndex, Index: [2]int{4, 2}}, six, [][]int{{4, 2}}, ""},
		{"index out of the file", PairSpec{Kind: PairIndex, Index: [2]int{4, 9}}, six, nil, ""},
		{"random", PairSpec{Kind: PairRandom, RandomPairs: 3}, six, nil, ""},
		{"too many random pairs", PairSpec{Kind: PairRandom, RandomPairs: 31}, six, nil, "random_pairs"},
		{"argmax", PairSpec{Kind: PairArgmax}, six, nil, ""},
		{"argmax of a missing audit", PairSpec{Kind: PairArgmax, Audit: "/nonexistent/audit.json"}, six, nil, "audit"},
		{"unknown kind", PairSpec{Kind: "best"}, six, nil, "pair"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cands, err := candidatePairs(ctx, tc.spec, nil, tc.p, "file.safetensors", 1e-5, 1, nil)
			var oe *option.Error
			switch {
			case tc.opt != "":
				if !errors.As(err, &oe) || oe.Option != tc.opt {
					t.Fatalf("err = %v, want an *option.Error for %s", err, tc.opt)
				}
				return
			case tc.name == "index out of the file":
				if err == nil || !strings.Contains(err.Error(), "posteriors of file.safetensors") {
					t.Fatalf("err = %v, want the file named", err)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			for _, c := range cands {
				if c.Result.Kind != tc.spec.Kind || len(c.Result.Index) != 2 || c.Pair.Q.N != 3 || c.Pair.Q.P != 2 {
					t.Errorf("candidate %+v", c.Result)
				}
			}
			switch tc.spec.Kind {
			case PairRandom:
				if len(cands) != 3 {
					t.Errorf("%d random pairs, want 3", len(cands))
				}
			case PairArgmax:
				i, j, rd, err := ArgmaxPair(ctx, tc.p, privacy.DefaultOrder, nil)
				if err != nil || len(cands) != 1 || !slices.Equal(cands[0].Result.Index, []int{i, j}) || cands[0].Result.AuditRD == nil ||
					float64(*cands[0].Result.AuditRD) != rd || cands[0].Result.AuditOrder != privacy.DefaultOrder {
					t.Errorf("argmax candidate %+v, want (%d, %d) rd %v (%v)", cands[0].Result, i, j, rd, err)
				}
			default:
				var got [][]int
				for _, c := range cands {
					got = append(got, c.Result.Index)
				}
				if !slices.EqualFunc(got, tc.index, slices.Equal) {
					t.Errorf("indices %v, want %v", got, tc.index)
				}
			}
		})
	}
}
