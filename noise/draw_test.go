package noise

import (
	"math/rand/v2"
	"testing"
)

// tieSource is a source of few distinct 16-bit digits, so that the sampler's rare paths become
// common: deviates equal in their first digits (lessFrom), a uniform equal to the first digit of
// a cumulative probability F(j) (intPartBelow) or beyond F(kTable-1) (the tail), and a digit
// equal to exp(-1/2)'s in the tail's trials. Each digit is one of 8, from 3 bits of src.
type tieSource struct {
	src      rand.Source
	alphabet [8]uint16
}

func newTieSource(seed uint64) *tieSource {
	tablesInit()
	return &tieSource{
		src:      rand.NewPCG(seed, 5),
		alphabet: [8]uint16{0, 1, 0x8000, 0xfffe, 0xffff, cellCDF0[1], cellCDF0[40], cellCDF0[cellTable-1]},
	}
}

func (s *tieSource) Uint64() uint64 {
	r := s.src.Uint64()
	var v uint64
	for i := range 4 {
		v |= uint64(s.alphabet[r>>(3*i)&7]) << (16 * i)
	}
	return v
}

// TestDrawReference: draw, the hot path, returns the values of drawRef, the sampler's steps
// spelled out one method each, and makes as many Uint64 calls, value by value: on the golden
// lattices and on lattices whose rounding takes the big-integer path (t beyond the 128-bit
// range, or more than 4 digits to start with), from PCG and from a source of few distinct
// digits that makes every rare path common (go test -cover shows them taken: intPartBelow,
// tail, lessFrom, roundBig).
func TestDrawReference(t *testing.T) {
	var lats []Lattice
	for _, gl := range goldenLattices {
		l, err := NewLattice(gl.sigma, gl.bound)
		if err != nil {
			t.Fatal(err)
		}
		lats = append(lats, l)
	}
	lats = append(lats, lattice(1, 70), lattice(3, -62), lattice(0xffffff, 50), lattice(1, -3), lattice(5, 60))
	sources := []struct {
		name string
		make func(seed uint64) rand.Source
	}{
		{"pcg", func(seed uint64) rand.Source { return rand.NewPCG(seed, 1) }},
		{"ties", func(seed uint64) rand.Source { return newTieSource(seed) }},
	}
	draws := 20_000
	if testing.Short() {
		draws = 2_000
	}
	var lessTies, bigRounds int
	for li, l := range lats {
		for _, src := range sources {
			fast, ref := &countingSource{src: src.make(uint64(li))}, &countingSource{src: src.make(uint64(li))}
			sf, sr := NewNoise(l, fast), NewNoise(l, ref)
			for i := range draws {
				a, b := sf.draw(), sr.drawRef()
				if a != b || fast.calls != ref.calls {
					t.Fatalf("a %d t %d, %s source, draw %d: %d after %d Uint64 calls, reference %d after %d", l.a, l.t, src.name, i, a, fast.calls, b, ref.calls)
				}
				// the rare paths the reference took (its deviates' digits)
				if sr.n.p.n > 1 || sr.n.q.n > 1 {
					lessTies++
				}
				if k := sr.n.x.n; k > 4 || sf.first == 0 {
					bigRounds++
				}
			}
		}
	}
	t.Logf("draws with: deviates compared past their first digit %d, rounding past 64 bits %d", lessTies, bigRounds)
	if lessTies == 0 || bigRounds == 0 {
		t.Error("a rare path was never taken")
	}
}

// TestDeviateReuse: a deviate made fresh (reset, fresh, setFirst) after holding more than
// inlineDigits digits holds the new digits, not the old ones past inlineDigits.
func TestDeviateReuse(t *testing.T) {
	b, want := newBitSource(rand.NewPCG(9, 9)), newBitSource(rand.NewPCG(9, 9))
	var u deviate
	for round, n := range []int{12, 10, 3, 20, 9, 11} {
		switch round % 3 {
		case 0:
			u.reset()
		case 1:
			u.fresh(&b)
			want.digit()
		case 2:
			u.setFirst(b.digit())
			want.digit()
		}
		start := u.digits()
		for i := start; i < n; i++ {
			if got, w := u.at(i, &b), want.digit(); got != w {
				t.Fatalf("round %d: digit %d is %#x, want %#x", round, i, got, w)
			}
		}
		if u.digits() != n {
			t.Fatalf("round %d: %d digits, want %d", round, u.digits(), n)
		}
	}
}
