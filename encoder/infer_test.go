package encoder

import (
	"math"
	"testing"

	"github.com/nvdp-project/nvdp/nn"
)

// Infer from a workspace reused across batches of other shapes and masks gives the bits of an
// inference Forward from fresh memory and of a training Forward without dropout, and a workspace grown to the largest batch grows no more
// (for inputs with a mask, the release's, which ask for their tensors in the same order).
func TestInferWorkspace(t *testing.T) {
	for _, mt := range []string{"bert", "roberta"} {
		cfg := tinyConfig(mt)
		cfg.HiddenDropoutProb, cfg.AttentionProbsDropoutProb = 0, 0 // the training pass is a reference
		e, err := New(cfg, newRng(7))
		if err != nil {
			t.Fatal(err)
		}
		pad := int32(cfg.PadTokenID)
		rng := newRng(8)
		input := func(B, S int, mask []float32) Input {
			in := Input{IDs: make([]int32, B*S), Mask: mask, B: B, S: S}
			for i := range in.IDs {
				in.IDs[i] = int32(3 + rng.IntN(cfg.VocabSize-3))
				if mask != nil && mask[i] == 0 {
					in.IDs[i] = pad
				}
			}
			return in
		}
		padded := input(2, 6, []float32{1, 1, 1, 0, 0, 0, 1, 1, 1, 1, 1, 0})
		ins := []struct {
			name string
			in   Input
		}{
			{"padded", padded},
			{"unpadded after padded", input(2, 6, []float32{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1})},
			{"no mask", input(1, 5, nil)},
			{"larger", input(3, 8, []float32{1, 1, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0})},
			{"padded again", padded},
			{"larger again", input(3, 8, []float32{1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1})},
		}
		var ws nn.Workspace
		grown := 0
		for i, c := range ins {
			want, _ := e.Forward(c.in, false, nil)
			train, _ := e.Forward(c.in, true, nil)
			for k := range want.Data {
				if math.Float32bits(train.Data[k]) != math.Float32bits(want.Data[k]) {
					t.Fatalf("%s, %s: element %d: %v inferred, %v in training without dropout", mt, c.name, k, want.Data[k], train.Data[k])
				}
			}
			ws.Reset()
			got := e.Infer(c.in, &ws)
			if !nn.SameShape(got, want) {
				t.Fatalf("%s, %s: shape %v, want %v", mt, c.name, got.Shape, want.Shape)
			}
			for k := range want.Data {
				if math.Float32bits(got.Data[k]) != math.Float32bits(want.Data[k]) {
					t.Fatalf("%s, %s: element %d: %v from the workspace, %v from fresh memory", mt, c.name, k, got.Data[k], want.Data[k])
				}
			}
			if i == 3 {
				grown = ws.Bytes()
			}
			if i > 3 && ws.Bytes() != grown {
				t.Errorf("%s, %s: the workspace grew from %d to %d bytes for a batch no larger than one seen", mt, c.name, grown, ws.Bytes())
			}
		}
	}
}
