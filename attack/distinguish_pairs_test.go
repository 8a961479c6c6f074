package attack

import (
	"context"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/privacy"
)

// The witness attains the certificate at the guarantee's best order (its
// Eq. rdp value there is the certified RD); a set with no finite epsilon
// has no witness.
func TestWitnessPair(t *testing.T) {
	set := nvdpSet(0.3)
	pair, g, err := WitnessPair(set, 1e-5, false)
	if err != nil {
		t.Fatal(err)
	}
	c, err := privacy.Certify(set, float64(g.BestOrder), privacy.DirectionStandard)
	if err != nil {
		t.Fatal(err)
	}
	b, err := privacy.PairBound(float64(g.BestOrder), pair.Q, pair.QPrime)
	if err != nil || math.Abs(b.Total-float64(c.RD)) > 1e-6*float64(c.RD) {
		t.Errorf("witness RD %v (%v) at order %v, certified %v", b.Total, err, g.BestOrder, c.RD)
	}
	if _, _, err := WitnessPair(set.Unclipped(), 1e-5, false); err == nil || !strings.Contains(err.Error(), "no finite epsilon") {
		t.Errorf("unclipped set: %v", err)
	}
}

// ArgmaxPair is the pair of the largest PairBound (brute force over a small
// file).
func TestArgmaxPair(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	p := privacy.NewPosteriors(6, 3, 2)
	for k := range p.Mu {
		p.Mu[k] = float32(rng.NormFloat64())
		p.Logvar[k] = float32(-0.5 * rng.Float64())
	}
	for k := range p.Alpha {
		p.Alpha[k] = float32(0.5 + rng.Float64())
	}
	i, j, rd, err := ArgmaxPair(context.Background(), p, 1.5, nil)
	if err != nil {
		t.Fatal(err)
	}
	best, bi, bj := math.Inf(-1), -1, -1
	for a := range p.M {
		for b := range p.M {
			if a == b {
				continue
			}
			t, _ := privacy.PairBound(1.5, p.View(a), p.View(b))
			if !math.IsInf(t.Total, 1) && t.Total > best {
				best, bi, bj = t.Total, a, b
			}
		}
	}
	if i != bi || j != bj || math.Abs(rd-best) > 1e-9*best {
		t.Errorf("argmax (%d, %d) rd %v; brute force (%d, %d) %v", i, j, rd, bi, bj, best)
	}
}

// RandomPairs are distinct, ordered, off the diagonal, reproducible, and
// cover every pair when asked for all of them.
func TestRandomPairs(t *testing.T) {
	ps, err := RandomPairs(4, 12, 3)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[[2]int]bool{}
	for _, p := range ps {
		if p[0] == p[1] || p[0] < 0 || p[1] >= 4 || seen[p] {
			t.Fatalf("pairs %v", ps)
		}
		seen[p] = true
	}
	again, _ := RandomPairs(4, 12, 3)
	other, _ := RandomPairs(4, 12, 4)
	if len(seen) != 12 || again[0] != ps[0] || again[5] != ps[5] || (other[0] == ps[0] && other[1] == ps[1] && other[2] == ps[2]) {
		t.Errorf("pairs %v, again %v, other seed %v", ps, again, other)
	}
	for _, bad := range [][2]int{{1, 1}, {4, 0}, {4, 13}} {
		if _, err := RandomPairs(bad[0], bad[1], 1); err == nil {
			t.Errorf("RandomPairs%v accepted", bad)
		}
	}
}

// ParseArgmax reads both audit formats and rejects, naming the file, what
// holds no usable pair.
func TestParseArgmax(t *testing.T) {
	for _, tc := range []struct {
		data       string
		i, j       int
		order      float64
		wantErrSub string
	}{
		{data: `{"mode":"principled","order":1.1,"argmax":[3,7],"rd_max":2}`, i: 3, j: 7, order: 1.1},
		{data: `{"task":"sst2","privacy":{"rd_max":4,"full":{"order":2,"argmax":[55,203]}}}`, i: 55, j: 203, order: 2},
		{data: `{"mode":"reference","order":1.1}`, wantErrSub: "no argmax"},
		{data: `{"argmax":[1]}`, wantErrSub: "argmax [1]"},
		{data: `{"argmax":[2,2]}`, wantErrSub: "two different"},
		{data: `{"argmax":[-1,2]}`, wantErrSub: "two different"},
		{data: `{"argmax":`, wantErrSub: "unexpected EOF"},
	} {
		i, j, o, err := ParseArgmax("a.json", []byte(tc.data))
		if tc.wantErrSub != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErrSub) || !strings.Contains(err.Error(), "a.json") {
				t.Errorf("%s: error %v, want %q", tc.data, err, tc.wantErrSub)
			}
			continue
		}
		if err != nil || i != tc.i || j != tc.j || o != tc.order {
			t.Errorf("%s: (%d, %d) order %v, %v", tc.data, i, j, o, err)
		}
	}
	if _, _, _, err := readArgmax(filepath.Join(t.TempDir(), "missing.json")); err == nil {
		t.Error("a missing file was read")
	}
}

// FuzzParseArgmax: any input gives a valid pair or an error, never a panic.
func FuzzParseArgmax(f *testing.F) {
	f.Add([]byte(`{"order":1.1,"argmax":[3,7]}`))
	f.Add([]byte(`{"privacy":{"full":{"argmax":[1,0]}}}`))
	f.Add([]byte(`{"privacy":null,"argmax":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		i, j, _, err := ParseArgmax("fuzz", data)
		if err == nil && (i < 0 || j < 0 || i == j) {
			t.Fatalf("accepted argmax (%d, %d) of %q", i, j, data)
		}
	})
}
