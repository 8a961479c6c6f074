package nn_test

import (
	"math"
	"testing"

	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/nn/nntest"
)

// naiveAttention is a float64 reference for nn.Attention.
func naiveAttention(q, k, v *nn.Tensor, H int, bias *nn.Tensor) []float64 {
	B, Tq, Tk, HD := q.Shape[0], q.Shape[1], k.Shape[1], q.Shape[2]
	dh := HD / H
	out := make([]float64, B*Tq*HD)
	for b := 0; b < B; b++ {
		for h := 0; h < H; h++ {
			for t := 0; t < Tq; t++ {
				s := make([]float64, Tk)
				mx := math.Inf(-1)
				for j := 0; j < Tk; j++ {
					for d := 0; d < dh; d++ {
						s[j] += float64(q.Data[(b*Tq+t)*HD+h*dh+d]) * float64(k.Data[(b*Tk+j)*HD+h*dh+d])
					}
					s[j] /= math.Sqrt(float64(dh))
					if bias != nil {
						s[j] += float64(bias.Data[b*Tk+j])
					}
					mx = math.Max(mx, s[j])
				}
				var z float64
				for j := range s {
					s[j] = math.Exp(s[j] - mx)
					z += s[j]
				}
				for j := range s {
					for d := 0; d < dh; d++ {
						out[(b*Tq+t)*HD+h*dh+d] += s[j] / z * float64(v.Data[(b*Tk+j)*HD+h*dh+d])
					}
				}
			}
		}
	}
	return out
}

func TestAttentionMatchesReference(t *testing.T) {
	rng := rngFor(10)
	for _, tc := range []struct {
		name             string
		B, Tq, Tk, H, dh int
		bias, mask       bool
	}{
		{"self/nobias", 2, 5, 5, 2, 4, false, false},
		{"self/padding", 2, 5, 5, 2, 4, false, true},
		{"cross/bias", 3, 2, 6, 4, 3, true, false},
		{"onehead/bias+padding", 1, 4, 4, 1, 8, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := nntest.RandTensor(rng, tc.B, tc.Tq, tc.H*tc.dh)
			k := nntest.RandTensor(rng, tc.B, tc.Tk, tc.H*tc.dh)
			v := nntest.RandTensor(rng, tc.B, tc.Tk, tc.H*tc.dh)
			var bias *nn.Tensor
			if tc.bias {
				bias = nntest.RandTensor(rng, tc.B, tc.Tk)
			}
			if tc.mask {
				if bias == nil {
					bias = nn.New(tc.B, tc.Tk)
				}
				bias.Data[tc.Tk-1] = float32(math.Inf(-1)) // last key of batch 0 is padding
			}
			out, _ := nn.Attention(q, k, v, tc.H, bias)
			want := naiveAttention(q, k, v, tc.H, bias)
			for i, w := range want {
				if math.Abs(float64(out.Data[i])-w) > 1e-5 {
					t.Fatalf("out[%d] = %v, want %v", i, out.Data[i], w)
				}
			}
		})
	}
}

func TestAttentionGradients(t *testing.T) {
	rng := rngFor(11)
	var cases []gradCase
	for _, tc := range []struct {
		name             string
		B, Tq, Tk, H, dh int
		bias             bool
		drop             float32
	}{
		{"self/nobias", 2, 4, 4, 2, 3, false, 0},
		{"cross/bias", 2, 3, 5, 2, 2, true, 0},
		{"self/bias/dropout", 2, 4, 4, 2, 3, true, 0.3},
	} {
		q := nntest.RandTensor(rng, tc.B, tc.Tq, tc.H*tc.dh)
		k := nntest.RandTensor(rng, tc.B, tc.Tk, tc.H*tc.dh)
		v := nntest.RandTensor(rng, tc.B, tc.Tk, tc.H*tc.dh)
		w := nntest.RandTensor(rng, tc.B, tc.Tq, tc.H*tc.dh)
		var bias *nn.Tensor
		in := map[string][]float32{"q": q.Data, "k": k.Data, "v": v.Data}
		if tc.bias {
			bias = nntest.RandTensor(rng, tc.B, tc.Tk)
			in["keyBias"] = bias.Data
		}
		fwd := func() (*nn.Tensor, *nn.AttentionCache) {
			return nn.AttentionDropout(q, k, v, tc.H, bias, tc.drop, rngFor(5), true)
		}
		cases = append(cases, gradCase{
			name: tc.name, inputs: in,
			loss: func() float64 { y, _ := fwd(); return nntest.Dot(w, y) },
			grads: func() map[string][]float32 {
				_, c := fwd()
				dq, dk, dv, db := nn.AttentionBackward(c, w)
				g := map[string][]float32{"q": dq.Data, "k": dk.Data, "v": dv.Data}
				if tc.bias {
					g["keyBias"] = db.Data
				} else if db != nil {
					t.Errorf("%s: dKeyBias without a key bias", tc.name)
				}
				return g
			},
		})
	}
	runGradCases(t, cases)
}

// TestAttentionPaddingKeys checks that -Inf keys get probability 0 and zero
// gradient, and that they do not change the output for real keys.
func TestAttentionPaddingKeys(t *testing.T) {
	rng := rngFor(12)
	B, S, H, dh := 2, 5, 2, 3
	q := nntest.RandTensor(rng, B, S, H*dh)
	k := nntest.RandTensor(rng, B, S, H*dh)
	v := nntest.RandTensor(rng, B, S, H*dh)
	mask := []float32{1, 1, 1, 0, 0, 1, 1, 1, 1, 1}
	bias := nn.PaddingBias(mask, B, S)
	if !math.IsInf(float64(bias.Data[3]), -1) || bias.Data[2] != 0 {
		t.Fatalf("PaddingBias = %v", bias.Data)
	}
	out, c := nn.Attention(q, k, v, H, bias)
	for h := 0; h < H; h++ {
		for tq := 0; tq < S; tq++ {
			row := c.Probs[((0*H+h)*S+tq)*S:]
			if row[3] != 0 || row[4] != 0 {
				t.Fatalf("padding keys got probability %v, %v", row[3], row[4])
			}
		}
	}
	// Changing padded keys/values must not change anything.
	k2, v2 := k.Clone(), v.Clone()
	for j := 3; j < 5; j++ {
		for d := 0; d < H*dh; d++ {
			k2.Data[j*H*dh+d] = 100
			v2.Data[j*H*dh+d] = -100
		}
	}
	out2, _ := nn.Attention(q, k2, v2, H, bias)
	for i := range out.Data {
		if out.Data[i] != out2.Data[i] {
			t.Fatalf("output %d depends on padded keys: %v vs %v", i, out.Data[i], out2.Data[i])
		}
	}
	dout := nntest.RandTensor(rng, B, S, H*dh)
	_, dk, dv, db := nn.AttentionBackward(c, dout)
	for j := 3; j < 5; j++ {
		for d := 0; d < H*dh; d++ {
			if dk.Data[j*H*dh+d] != 0 || dv.Data[j*H*dh+d] != 0 {
				t.Fatalf("padded key %d has gradient dk %v dv %v", j, dk.Data[j*H*dh+d], dv.Data[j*H*dh+d])
			}
		}
		if db.Data[j] != 0 || math.IsNaN(float64(db.Data[j])) {
			t.Fatalf("dKeyBias at padded key %d = %v", j, db.Data[j])
		}
	}
	// dKeyBias sums to zero per batch (softmax is shift invariant).
	for b := 0; b < B; b++ {
		var s float64
		for j := 0; j < S; j++ {
			s += float64(db.Data[b*S+j])
		}
		if math.Abs(s) > 1e-4 {
			t.Errorf("sum of dKeyBias[%d] = %v, want 0", b, s)
		}
	}
}

func TestAttentionAllMaskedPanics(t *testing.T) {
	q := nn.New(1, 2, 2)
	bias := nn.PaddingBias([]float32{0, 0}, 1, 2)
	defer func() {
		if recover() == nil {
			t.Fatal("no panic for a fully masked row")
		}
	}()
	nn.Attention(q, q, q, 1, bias)
}

// TestAttentionNonFiniteScores (issue 32): a query row whose scores are not
// finite (NaN, or -Inf from weights that overflowed) with a key left
// unmasked gives NaN in its output row, and only there, as the device's
// kernel does, for the model's finiteness checks to report (it panicked);
// rows with a finite score are untouched.
func TestAttentionNonFiniteScores(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	// [B=1, T=2, 2]: query 0 is NaN, query 1 finite; keys finite.
	q := nn.FromData([]float32{nan, 1, 0.5, -0.25}, 1, 2, 2)
	k := nn.FromData([]float32{1, 2, -1, 0.5}, 1, 2, 2)
	v := nn.FromData([]float32{1, 2, 3, 4}, 1, 2, 2)
	out, _ := nn.Attention(q, k, v, 1, nil)
	ref, _ := nn.Attention(nn.FromData([]float32{0.5, -0.25}, 1, 1, 2), k, v, 1, nil)
	for i, x := range out.Data {
		if i < 2 && !math.IsNaN(float64(x)) {
			t.Errorf("NaN query: output %d = %v, want NaN", i, x)
		}
		if i >= 2 && x != ref.Data[i-2] {
			t.Errorf("finite query: output %d = %v, want %v", i, x, ref.Data[i-2])
		}
	}
	// Scores overflowing to -Inf on every key (a huge query against huge
	// keys), the second key masked: NaN, not a panic.
	big := nn.FromData([]float32{-inf, 0}, 1, 1, 2)
	kb := nn.FromData([]float32{inf, 0, inf, 0}, 1, 2, 2)
	out, _ = nn.Attention(big, kb, v, 1, nn.PaddingBias([]float32{1, 0}, 1, 2))
	for i, x := range out.Data {
		if !math.IsNaN(float64(x)) {
			t.Errorf("overflowed scores: output %d = %v, want NaN", i, x)
		}
	}
}
