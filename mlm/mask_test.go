package mlm

import (
	"math"
	"math/rand/v2"
	"testing"
)

// maskSeq returns a sequence [CLS] w... [SEP] pad... with nw words of 1-3
// pieces each (ids >= 10) and its word ids; specials are 0 [PAD], 1 [CLS],
// 2 [SEP], 3 [MASK], 4 [UNK].
func maskSeq(rng *rand.Rand, nw, pad, V int) ([]int32, []int) {
	ids := []int32{1}
	words := []int{-1}
	for w := range nw {
		for range 1 + rng.IntN(3) {
			ids = append(ids, int32(10+rng.IntN(V-10)))
			words = append(words, w)
		}
	}
	ids = append(ids, 2)
	words = append(words, -1)
	for range pad {
		ids = append(ids, 0)
		words = append(words, -1)
	}
	return ids, words
}

func TestMaskerProportions(t *testing.T) {
	const V = 1000
	for _, whole := range []bool{false, true} {
		m, err := newMasker(3, V, []int{0, 1, 2, 4}, whole)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(7, 8))
		var chosen, nMask, nRandom, nKeep, maskable int
		for range 3000 {
			ids, words := maskSeq(rng, 20+rng.IntN(30), rng.IntN(10), V)
			orig := append([]int32(nil), ids...)
			n := 0
			for _, id := range orig {
				if id >= 10 {
					n++
				}
			}
			maskable += n
			var w []int
			if whole {
				w = words
			}
			pos, labels := m.Mask(ids, w, rng)
			budget := int(math.Round(0.15 * float64(n)))
			if !whole && len(pos) != budget {
				t.Fatalf("whole=%v: %d tokens chosen of %d, want %d", whole, len(pos), n, budget)
			}
			if whole && (len(pos) > budget || len(pos) < budget-2) {
				t.Fatalf("whole=%v: %d tokens chosen, budget %d (words are at most 3 pieces)", whole, len(pos), budget)
			}
			isChosen := map[int]bool{}
			for k, p := range pos {
				isChosen[p] = true
				if orig[p] < 10 {
					t.Fatalf("special or pad token %d at %d was masked", orig[p], p)
				}
				if labels[k] != int(orig[p]) {
					t.Fatalf("label %d at %d, original %d", labels[k], p, orig[p])
				}
				switch {
				case ids[p] == 3:
					nMask++
				case ids[p] == orig[p]:
					nKeep++
				default:
					nRandom++
					if ids[p] <= 4 {
						t.Fatalf("random replacement %d is special", ids[p])
					}
				}
			}
			for i := range ids {
				if !isChosen[i] && ids[i] != orig[i] {
					t.Fatalf("unchosen position %d changed %d -> %d", i, orig[i], ids[i])
				}
			}
			if whole {
				// all pieces of a chosen word are chosen
				for i := range ids {
					for j := range ids {
						if words[i] >= 0 && words[i] == words[j] && isChosen[i] != isChosen[j] {
							t.Fatalf("word %d partly masked (positions %d, %d)", words[i], i, j)
						}
					}
				}
			}
			chosen += len(pos)
		}
		frac := float64(chosen) / float64(maskable)
		if math.Abs(frac-0.15) > 0.01 {
			t.Errorf("whole=%v: masked fraction %.4f, want 0.15", whole, frac)
		}
		// 80/10/10 within 4 binomial standard deviations; a random draw equals
		// the original with probability 1/(V-5), counted as keep.
		pKeep := 0.1 + 0.1/float64(V-5)
		for _, c := range []struct {
			name string
			got  int
			p    float64
		}{{"mask", nMask, 0.8}, {"random", nRandom, 0.1 - 0.1/float64(V-5)}, {"keep", nKeep, pKeep}} {
			sd := math.Sqrt(c.p * (1 - c.p) / float64(chosen))
			if f := float64(c.got) / float64(chosen); math.Abs(f-c.p) > 4*sd {
				t.Errorf("whole=%v: %s fraction %.4f, want %.4f +- %.4f", whole, c.name, f, c.p, 4*sd)
			}
		}
		t.Logf("whole=%v: %d chosen of %d (%.4f): mask %.4f random %.4f keep %.4f", whole, chosen, maskable, frac,
			float64(nMask)/float64(chosen), float64(nRandom)/float64(chosen), float64(nKeep)/float64(chosen))
	}
}

func TestMaskerUniformPositions(t *testing.T) {
	// Every maskable position of a fixed sequence is chosen with probability 0.15.
	m, _ := newMasker(3, 100, []int{0, 1, 2}, false)
	rng := rand.New(rand.NewPCG(1, 1))
	const trials = 20000
	counts := make([]int, 22)
	for range trials {
		ids := make([]int32, 22)
		ids[0], ids[21] = 1, 2
		for i := 1; i <= 20; i++ {
			ids[i] = int32(10 + i)
		}
		pos, _ := m.Mask(ids, nil, rng)
		for _, p := range pos {
			counts[p]++
		}
	}
	if counts[0] != 0 || counts[21] != 0 {
		t.Fatalf("specials chosen: %v", counts)
	}
	sd := math.Sqrt(0.15 * 0.85 / trials)
	for i := 1; i <= 20; i++ {
		if f := float64(counts[i]) / trials; math.Abs(f-0.15) > 4.5*sd {
			t.Errorf("position %d chosen with frequency %.4f, want 0.15", i, f)
		}
	}
}

func TestMaskerSeededAndEdgeCases(t *testing.T) {
	m, _ := newMasker(3, 1000, []int{0, 1, 2}, true)
	a, wa := maskSeq(rand.New(rand.NewPCG(3, 3)), 30, 4, 1000)
	b := append([]int32(nil), a...)
	pa, _ := m.Mask(a, wa, rand.New(rand.NewPCG(9, 9)))
	pb, _ := m.Mask(b, wa, rand.New(rand.NewPCG(9, 9)))
	if len(pa) != len(pb) {
		t.Fatal("same seed, different masks")
	}
	for i := range a {
		if a[i] != b[i] {
			t.Fatal("same seed, different corruption")
		}
	}
	// only specials: nothing to mask
	if p, _ := m.Mask([]int32{1, 2, 0, 0}, []int{-1, -1, -1, -1}, rand.New(rand.NewPCG(1, 1))); len(p) != 0 {
		t.Fatalf("masked %v in a sequence of specials", p)
	}
	// one maskable token: at least one prediction
	if p, _ := m.Mask([]int32{1, 50, 2}, []int{-1, 0, -1}, rand.New(rand.NewPCG(1, 1))); len(p) != 1 || p[0] != 1 {
		t.Fatalf("got %v, want [1]", p)
	}
	if _, err := newMasker(-1, 100, nil, false); err == nil {
		t.Error("vocabulary without [MASK] accepted")
	}
}
