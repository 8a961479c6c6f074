package encoder

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/nvdp-project/nvdp/safetensors"
)

// TestPyTorchReference compares last_hidden_state with a PyTorch
// re-statement of transformers' BertModel / RobertaModel forward on the
// fixtures written by testdata/gen_reference.py (task-model names with
// prefix and head tensors; RoBERTa stored as float16).
func TestPyTorchReference(t *testing.T) {
	for _, name := range []string{"tiny-bert", "tiny-roberta"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join("testdata", name)
			e, err := Load("hf:"+dir, LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			ref, err := safetensors.ReadFile(filepath.Join(dir, "reference.safetensors"))
			if err != nil {
				t.Fatal(err)
			}
			get := func(n string) *safetensors.Tensor {
				tt, ok := ref.Get(n)
				if !ok {
					t.Fatalf("reference lacks %s", n)
				}
				return tt
			}
			idsT := get("input_ids")
			B, S := idsT.Shape[0], idsT.Shape[1]
			ids, _ := idsT.Int64()
			tt, _ := get("token_type_ids").Int64()
			am, _ := get("attention_mask").Int64()
			want, err := get("last_hidden_state").Float32()
			if err != nil {
				t.Fatal(err)
			}
			in := Input{B: B, S: S, IDs: make([]int32, B*S), TypeIDs: make([]int32, B*S), Mask: make([]float32, B*S)}
			for i := range ids {
				in.IDs[i], in.TypeIDs[i], in.Mask[i] = int32(ids[i]), int32(tt[i]), float32(am[i])
			}
			y, _ := e.Forward(in, false, nil)
			if len(y.Data) != len(want) {
				t.Fatalf("output %v, reference %d values", y.Shape, len(want))
			}
			var worst float64
			for i, w := range want {
				worst = math.Max(worst, math.Abs(float64(y.Data[i]-w)))
			}
			if worst > 2e-5 {
				t.Fatalf("max |ours - pytorch| = %.3g", worst)
			}
			t.Logf("max |ours - pytorch| = %.3g", worst)
		})
	}
}
