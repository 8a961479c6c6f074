package nvib

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/privacy"
)

// clipMuRef is ClipMu as written before its closures were taken out (for the speed of the release
// path): the reference of TestClipMuSameAsRef.
func clipMuRef(mu []float32, center []float32, cMu float64) (n float64, active bool) {
	ctr := func(j int) float64 {
		if center == nil {
			return 0
		}
		return float64(center[j])
	}
	var s float64
	for j, v := range mu {
		d := float64(v) - ctr(j)
		s += float64(d * d)
	}
	n = math.Max(math.Sqrt(s), 1e-8)
	R := privacy.StoredRadius(cMu)
	if !(n > R) { // also false for NaN: NaN propagates
		return n, false
	}
	// The offset of entry j from the centre and its length: for a row with
	// ±Inf entries, the direction of their signs (their number's root).
	offset := func(j int, v float32) float64 { return float64(v) - ctr(j) }
	length := n
	if math.IsInf(n, 1) {
		var cnt int
		for _, v := range mu {
			if math.IsInf(float64(v), 0) {
				cnt++
			}
		}
		offset = func(_ int, v float32) float64 {
			switch {
			case math.IsInf(float64(v), 1):
				return 1
			case math.IsInf(float64(v), -1):
				return -1
			}
			return 0
		}
		length = math.Sqrt(float64(cnt))
	}
	// Project onto R, then shrink towards the centre until the stored
	// vector's distance is within it: rounding each entry to float32 can put
	// the result outside the ball (~1e-7 relative, more when |centre| >>
	// C_mu). At try 24 the factor is 0: the row is the centre.
	r := R / length
	for try := 0; ; try++ {
		var d2 float64
		for j, v := range mu {
			c := ctr(j)
			if try == 0 {
				mu[j] = float32(c + float64(offset(j, v)*r))
			} else { // shrink by 2^(try-24): doubling, since with a centre the rounding is relative to |c|
				mu[j] = float32(c + float64((float64(mu[j])-c)*(1-math.Ldexp(1, try-24))))
			}
			e := float64(mu[j]) - c
			d2 += float64(e * e)
		}
		if math.Sqrt(d2) <= R || try == 24 {
			break
		}
	}
	return n, true
}

// TestClipMuSameAsRef: ClipMu returns what clipMuRef returns and stores the same row, bit for bit,
// over rows inside and outside the ball (so with and without shrinking), with and without a centre
// (one far from the origin, where the shrink loop runs most), with ±Inf, NaN and ±0 entries.
func TestClipMuSameAsRef(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	specials := []float32{float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 0, float32(math.Copysign(0, -1))}
	var shrunk int
	for trial := range 20000 {
		P := []int{1, 2, 3, 16, 128}[trial%5]
		mu := make([]float32, P)
		scale := math.Pow(10, r.Float64()*6-3)
		for j := range mu {
			mu[j] = float32(r.NormFloat64() * scale)
			if trial%50 == 0 && r.IntN(4) == 0 {
				mu[j] = specials[r.IntN(len(specials))]
			}
		}
		var center []float32
		if trial%3 == 1 {
			center = make([]float32, P)
			for j := range center {
				center[j] = float32(r.NormFloat64() * math.Pow(10, r.Float64()*8-2))
			}
		}
		cMu := math.Pow(10, r.Float64()*6-3)
		got, want := append([]float32(nil), mu...), append([]float32(nil), mu...)
		n, active := ClipMu(got, center, cMu)
		wn, wactive := clipMuRef(want, center, cMu)
		if math.Float64bits(n) != math.Float64bits(wn) && !(n != n && wn != wn) || active != wactive {
			t.Fatalf("trial %d: ClipMu gives n %v active %v, the reference %v %v", trial, n, active, wn, wactive)
		}
		for j := range got {
			if math.Float32bits(got[j]) != math.Float32bits(want[j]) {
				t.Fatalf("trial %d (P %d, centre %v, cMu %v): entry %d %v, the reference %v", trial, P, center != nil, cMu, j, got[j], want[j])
			}
		}
		if active && center != nil {
			var d2 float64
			for j := range got {
				e := float64(got[j]) - float64(center[j])
				d2 += e * e
			}
			if math.Sqrt(d2) < 0.9999*cMu {
				shrunk++
			}
		}
	}
	if shrunk == 0 {
		t.Error("no row was shrunk below its radius: the shrink loop was not exercised")
	}
}

// TestPosteriorCheckFinite: the first NaN or ±Inf of mu, then logvar, then
// alpha, and a pseudo-count <= 0 of a released component, are errors naming
// the tensor, the example and the component; a masked padding component's
// pseudo-count 0 is not (reference mode).
func TestPosteriorCheckFinite(t *testing.T) {
	const B, N, P = 2, 3, 4
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	for _, tc := range []struct {
		name   string
		set    func(p *Posterior)
		padded bool   // PadsReleased (principled mode)
		want   string // "" for none
	}{
		{"finite", func(p *Posterior) {}, true, ""},
		{"mu NaN", func(p *Posterior) { p.Mu.Data[1*N*P+2*P+3] = nan }, true, "tensor mu: invalid value NaN at example 1, component 2"},
		{"mu and logvar", func(p *Posterior) { p.Logvar.Data[0] = inf; p.Mu.Data[N*P] = -inf }, true, "tensor mu: invalid value -Inf at example 1, component 0"},
		{"logvar Inf", func(p *Posterior) { p.Logvar.Data[P+1] = inf }, true, "tensor logvar: invalid value +Inf at example 0, component 1"},
		{"alpha Inf", func(p *Posterior) { p.Alpha.Data[4] = inf }, true, "tensor alpha: invalid value +Inf at example 1, component 1"},
		{"alpha 0, released", func(p *Posterior) { p.Alpha.Data[5] = 0 }, true, "tensor alpha: invalid value 0 at example 1, component 2"},
		{"alpha 0, masked", func(p *Posterior) { p.Alpha.Data[5] = 0 }, false, ""},
		{"alpha NaN, masked", func(p *Posterior) { p.Alpha.Data[5] = nan }, false, "tensor alpha: invalid value NaN at example 1, component 2"},
	} {
		p := &Posterior{B: B, N: N, P: P, Mu: nn.New(B, N, P), Logvar: nn.New(B, N, P), Alpha: nn.New(B, N),
			Mask: []float32{1, 1, 1, 1, 1, 0}, PadsReleased: tc.padded}
		for i := range p.Alpha.Data {
			p.Alpha.Data[i] = 1
		}
		tc.set(p)
		err := p.checkFinite()
		if got := fmt.Sprint(err); tc.want == "" && err != nil || tc.want != "" && !strings.Contains(got, tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestClipMu4SameAsClipMu: clipMu4 returns what ClipMu returns for each of its four rows and
// stores the same rows, bit for bit: rows inside and outside the ball in every mix (so both of
// its paths), with and without a centre, with ±Inf, NaN and ±0 entries, and rows that need the
// shrink loop after the first try.
func TestClipMu4SameAsClipMu(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	specials := []float32{float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 0, float32(math.Copysign(0, -1))}
	var together, shrunk int
	for trial := range 20000 {
		P := []int{1, 2, 3, 16, 128}[trial%5]
		cMu := math.Pow(10, r.Float64()*6-3)
		var center []float32
		if trial%3 == 1 {
			center = make([]float32, P)
			for j := range center {
				center[j] = float32(r.NormFloat64() * math.Pow(10, r.Float64()*8-2))
			}
		}
		var got, want [4][]float32
		for i := range got {
			scale := math.Pow(10, r.Float64()*6-3)
			if trial%2 == 0 {
				scale = cMu * 10 // outside the ball: the four at once
			}
			row := make([]float32, P)
			for j := range row {
				row[j] = float32(r.NormFloat64() * scale)
				if center != nil {
					row[j] += center[j]
				}
				if trial%50 == 0 && r.IntN(4) == 0 {
					row[j] = specials[r.IntN(len(specials))]
				}
			}
			got[i], want[i] = row, append([]float32(nil), row...)
		}
		n, active := clipMu4(got[0], got[1], got[2], got[3], center, cMu)
		all := true
		for i := range want {
			wn, wactive := ClipMu(want[i], center, cMu)
			if math.Float64bits(n[i]) != math.Float64bits(wn) && !(n[i] != n[i] && wn != wn) || active[i] != wactive {
				t.Fatalf("trial %d, row %d: clipMu4 gives n %v active %v, ClipMu %v %v", trial, i, n[i], active[i], wn, wactive)
			}
			for j := range got[i] {
				if math.Float32bits(got[i][j]) != math.Float32bits(want[i][j]) {
					t.Fatalf("trial %d (P %d, centre %v, cMu %v), row %d: entry %d %v, ClipMu %v", trial, P, center != nil, cMu, i, j, got[i][j], want[i][j])
				}
			}
			all = all && wactive && !math.IsInf(wn, 1)
			if wactive && center != nil {
				var d2 float64
				for j := range got[i] {
					e := float64(got[i][j]) - float64(center[j])
					d2 += e * e
				}
				if math.Sqrt(d2) < 0.9999*privacy.StoredRadius(cMu) {
					shrunk++
				}
			}
		}
		if all {
			together++
		}
	}
	t.Logf("%d trials with the four rows projected at once, %d rows shrunk below their radius", together, shrunk)
	if together == 0 || shrunk == 0 {
		t.Error("a path of clipMu4 was not exercised")
	}
}

// BenchmarkClipMu clips the 65 rows of one release's means (P 128), each outside the ball: one
// row at a time (ClipMu), and as clipPosteriorInto groups them (the prior row alone, the 64 others
// four at a time, clipMu4).
func BenchmarkClipMu(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	rows := make([]float32, 65*128)
	for j := range rows {
		rows[j] = float32(r.NormFloat64())
	}
	mu := make([]float32, len(rows))
	b.Run("rows=1", func(b *testing.B) {
		for b.Loop() {
			copy(mu, rows)
			for k := 0; k < len(mu); k += 128 {
				ClipMu(mu[k:k+128], nil, 3)
			}
		}
	})
	b.Run("rows=4", func(b *testing.B) {
		for b.Loop() {
			copy(mu, rows)
			ClipMu(mu[:128], nil, 3)
			for k := 128; k+4*128 <= len(mu); k += 4 * 128 {
				clipMu4(mu[k:k+128], mu[k+128:k+256], mu[k+256:k+384], mu[k+384:k+512], nil, 3)
			}
		}
	})
}
