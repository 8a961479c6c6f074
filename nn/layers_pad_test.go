package nn

import "testing"

// TestEmbeddingPaddingIdx: the padding row receives no gradient while other
// rows accumulate, and a gradient already in the padding row (e.g. from a tied
// decoder) is left untouched.
func TestEmbeddingPaddingIdx(t *testing.T) {
	e := NewEmbedding("emb", 4, 2)
	e.PaddingIdx = 0
	e.W.Grad.Data[0], e.W.Grad.Data[1] = 7, 8 // earlier contribution to the pad row
	dy := FromData([]float32{1, 2, 3, 4, 5, 6}, 3, 2)
	e.Backward([]int32{0, 2, 2}, dy)
	want := []float32{7, 8, 0, 0, 8, 10, 0, 0}
	for i, w := range want {
		if e.W.Grad.Data[i] != w {
			t.Fatalf("grad %v, want %v", e.W.Grad.Data, want)
		}
	}
	if NewEmbedding("x", 2, 2).PaddingIdx != -1 {
		t.Error("NewEmbedding must have no padding row")
	}
}
