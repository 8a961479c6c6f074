package encoder

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/nn"
)

// tinyConfig is a 1-layer encoder small enough for finite differences.
func tinyConfig(modelType string) Config {
	c := defaultConfig(modelType)
	c.VocabSize, c.HiddenSize, c.NumHiddenLayers, c.NumAttentionHeads, c.IntermediateSize = 13, 8, 1, 2, 16
	c.MaxPositionEmbeddings, c.TypeVocabSize = 10, 2
	if modelType == "roberta" {
		c.TypeVocabSize, c.LayerNormEps = 1, 1e-5
	}
	return c
}

func newRng(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed+1)) }

// tinyInput is a batch of 2 sequences of length 6; row 1 has 2 pads.
func tinyInput(cfg Config) Input {
	pad := int32(cfg.PadTokenID)
	ids := []int32{3, 5, 7, 9, 11, 4, 6, 8, 12, 3, pad, pad}
	typ := []int32{0, 0, 0, 1, 1, 1, 0, 0, 1, 1, 0, 0}
	if cfg.TypeVocabSize == 1 {
		typ = make([]int32, 12)
	}
	mask := []float32{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0}
	return Input{IDs: ids, TypeIDs: typ, Mask: mask, B: 2, S: 6}
}

func TestGradientFiniteDifferences(t *testing.T) {
	tests := []struct {
		name      string
		modelType string
		dropout   float64
		recompute bool
	}{
		{"bert/dropout", "bert", 0.2, false},
		{"bert/nodropout", "bert", 0, false},
		{"bert/dropout/recompute-gelu", "bert", 0.2, true},
		{"roberta/nodropout", "roberta", 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tinyConfig(tc.modelType)
			cfg.HiddenDropoutProb, cfg.AttentionProbsDropoutProb = tc.dropout, tc.dropout
			if tc.recompute {
				defer func(v int) { RecomputeGELUBytes = v }(RecomputeGELUBytes)
				RecomputeGELUBytes = 0
			}
			// A large init std makes attention non-uniform and gradients healthy.
			cfg.InitializerRange = 0.5
			e, err := New(cfg, newRng(1))
			if err != nil {
				t.Fatal(err)
			}
			// LayerNorm params away from 1/0 so their gradients are generic.
			r := newRng(2)
			for _, p := range e.Params() {
				if strings.Contains(p.Name, "LayerNorm") {
					for i := range p.Value.Data {
						p.Value.Data[i] += float32(r.NormFloat64() * 0.3)
					}
				}
			}
			in := tinyInput(cfg)
			R := make([]float32, in.B*in.S*cfg.HiddenSize)
			for i := range R {
				R[i] = float32(r.NormFloat64())
			}
			// loss = sum(last_hidden_state * R), dropout masks fixed by reseeding.
			loss := func() float64 {
				y, _ := e.Forward(in, true, newRng(7))
				var s float64
				for i, v := range y.Data {
					s += float64(v) * float64(R[i])
				}
				return s
			}
			nn.ZeroGrads(e.Params())
			_, c := e.Forward(in, true, newRng(7))
			e.Backward(c, nn.FromData(append([]float32(nil), R...), in.B, in.S, cfg.HiddenSize))

			const h = 1e-2
			var maxGrad float64
			checked := 0
			for _, p := range e.Params() {
				idx := probeIndices(p, in, cfg, r)
				for _, i := range idx {
					if i == padRowProbe(p, cfg) {
						// nn.Embedding(padding_idx=...) semantics: no gradient.
						if p.Grad.Data[i] != 0 {
							t.Errorf("%s[%d] padding row gradient %v, want 0", p.Name, i, p.Grad.Data[i])
						}
						continue
					}
					old := p.Value.Data[i]
					p.Value.Data[i] = old + h
					lp := loss()
					p.Value.Data[i] = old - h
					lm := loss()
					p.Value.Data[i] = old
					num := (lp - lm) / (2 * h)
					ana := float64(p.Grad.Data[i])
					maxGrad = math.Max(maxGrad, math.Abs(ana))
					if d := math.Abs(num - ana); d > 2e-3+1e-2*math.Max(math.Abs(num), math.Abs(ana)) {
						t.Errorf("%s[%d]: analytic %.6g, numeric %.6g", p.Name, i, ana, num)
					}
					checked++
				}
			}
			if maxGrad < 0.1 {
				t.Fatalf("gradients too small to test (max %g)", maxGrad)
			}
			if checked < 3*len(e.Params())-10 {
				t.Fatalf("checked only %d entries", checked)
			}
		})
	}
}

// probeIndices picks 3 entries of p that the input actually reaches (rows of
// used ids for embeddings), plus for the word embeddings the padding row,
// whose gradient must be exactly 0.
func probeIndices(p *nn.Param, in Input, cfg Config, r *rand.Rand) []int {
	D := p.Value.Dim(-1)
	pick := func(rows []int) []int {
		var out []int
		for k := 0; k < 3; k++ {
			row := rows[k%len(rows)]
			out = append(out, row*D+r.IntN(D))
		}
		return out
	}
	switch {
	case strings.HasSuffix(p.Name, "word_embeddings.weight"):
		return append(pick([]int{3, 7, 12}), cfg.PadTokenID*D+1)
	case strings.HasSuffix(p.Name, "position_embeddings.weight"):
		if cfg.ModelType == "roberta" {
			return pick([]int{2, 4, 7})
		}
		return pick([]int{0, 3, 5})
	case strings.HasSuffix(p.Name, "token_type_embeddings.weight"):
		return pick([]int{0, cfg.TypeVocabSize - 1})
	}
	out := []int{}
	for k := 0; k < 3; k++ {
		out = append(out, r.IntN(p.Value.Len()))
	}
	return out
}

func padRowProbe(p *nn.Param, cfg Config) int {
	if strings.HasSuffix(p.Name, "word_embeddings.weight") {
		return cfg.PadTokenID*p.Value.Dim(-1) + 1
	}
	return -1
}

func TestPaddingMask(t *testing.T) {
	for _, mt := range []string{"bert", "roberta"} {
		t.Run(mt, func(t *testing.T) {
			cfg := tinyConfig(mt)
			cfg.InitializerRange = 0.5
			e, err := New(cfg, newRng(3))
			if err != nil {
				t.Fatal(err)
			}
			in := tinyInput(cfg)
			y1, c := e.Forward(in, false, nil)
			if c != nil {
				t.Fatal("inference returned a cache")
			}
			in2 := in
			in2.IDs = append([]int32(nil), in.IDs...)
			in2.TypeIDs = append([]int32(nil), in.TypeIDs...)
			in2.IDs[10], in2.IDs[11] = 9, 12 // pads now hold other tokens
			if cfg.TypeVocabSize > 1 {
				in2.TypeIDs[11] = 1
			}
			y2, _ := e.Forward(in2, false, nil)
			H := cfg.HiddenSize
			for i := 0; i < in.B*in.S; i++ {
				if in.Mask[i] == 0 {
					continue
				}
				for j := 0; j < H; j++ {
					if a, b := y1.Data[i*H+j], y2.Data[i*H+j]; math.Abs(float64(a-b)) > 1e-6 {
						t.Fatalf("token %d changed when pads changed: %v vs %v", i, a, b)
					}
				}
			}
			// Teeth: without the mask the pads do change the real tokens.
			in3, in4 := in, in2
			in3.Mask, in4.Mask = nil, nil
			y3, _ := e.Forward(in3, false, nil)
			y4, _ := e.Forward(in4, false, nil)
			if math.Abs(float64(y3.Data[6*H]-y4.Data[6*H])) < 1e-4 {
				t.Fatal("unmasked pads do not affect row 1; the test has no teeth")
			}
		})
	}
}

func TestTrainWithoutDropoutEqualsInference(t *testing.T) {
	cfg := tinyConfig("bert")
	cfg.HiddenDropoutProb, cfg.AttentionProbsDropoutProb = 0, 0
	e, _ := New(cfg, newRng(4))
	in := tinyInput(cfg)
	y1, _ := e.Forward(in, false, nil)
	y2, c := e.Forward(in, true, nil)
	if c == nil {
		t.Fatal("training forward returned no cache")
	}
	for i := range y1.Data {
		if y1.Data[i] != y2.Data[i] {
			t.Fatalf("element %d: %v vs %v", i, y1.Data[i], y2.Data[i])
		}
	}
	// With dropout, training differs from inference, and inference is deterministic.
	cfg.HiddenDropoutProb = 0.1
	e.Config = cfg
	y3, _ := e.Forward(in, true, newRng(1))
	same := true
	for i := range y1.Data {
		same = same && y1.Data[i] == y3.Data[i]
	}
	if same {
		t.Fatal("dropout had no effect in training mode")
	}
}

func TestRobertaPositionIDs(t *testing.T) {
	cfg := tinyConfig("roberta")
	e := newZero(cfg)
	// pad = 1: positions start at 2, pads get 1 (create_position_ids_from_input_ids).
	in := Input{IDs: []int32{0, 5, 6, 2, 1, 1, 0, 1, 7, 2, 1, 1}, B: 2, S: 6}
	got := e.positionIDs(in)
	want := []int32{2, 3, 4, 5, 1, 1, 2, 1, 3, 4, 1, 1}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("roberta positions %v, want %v", got, want)
	}
	bcfg := tinyConfig("bert")
	if got := newZero(bcfg).positionIDs(Input{IDs: make([]int32, 6), B: 2, S: 3}); fmt.Sprint(got) != "[0 1 2 0 1 2]" {
		t.Fatalf("bert positions %v", got)
	}
}

func TestInitHF(t *testing.T) {
	cfg, _ := Preset("bert-tiny")
	e, err := New(cfg, newRng(5))
	if err != nil {
		t.Fatal(err)
	}
	names := nn.SortedNames(e.Params())
	total := 0
	for _, p := range e.Params() {
		total += p.Value.Len()
	}
	if total != cfg.NumParams() || len(names) != 5+16*cfg.NumHiddenLayers {
		t.Fatalf("%d params in %d tensors", total, len(names))
	}
	for _, want := range []string{
		"embeddings.word_embeddings.weight", "encoder.layer.0.attention.self.query.weight",
		"encoder.layer.1.attention.output.LayerNorm.weight", "encoder.layer.0.intermediate.dense.weight",
		"encoder.layer.1.output.dense.bias", "encoder.layer.1.output.LayerNorm.bias",
	} {
		found := false
		for _, n := range names {
			found = found || n == want
		}
		if !found {
			t.Errorf("missing parameter %s", want)
		}
	}
	w := e.WordEmb.W.Value.Data
	var s, ss float64
	for _, v := range w {
		s += float64(v)
		ss += float64(v) * float64(v)
	}
	n := float64(len(w) - cfg.HiddenSize)
	if mean, std := s/n, math.Sqrt(ss/n); math.Abs(mean) > 1e-3 || math.Abs(std-0.02) > 4e-4 {
		t.Fatalf("word embedding init mean %g std %g, want 0, 0.02", mean, std)
	}
	for j := 0; j < cfg.HiddenSize; j++ {
		if w[j] != 0 { // pad_token_id 0 row
			t.Fatalf("padding row not zero: %v", w[j])
		}
	}
	l := e.Layers[1]
	if l.Query.B.Value.Data[3] != 0 || l.OutLN.Weight.Value.Data[5] != 1 || l.OutLN.Bias.Value.Data[5] != 0 || l.Inter.W.Value.Data[7] == 0 {
		t.Fatal("linear/LayerNorm init wrong")
	}
	if !l.AttnLN.Weight.NoDecay || !l.Inter.B.NoDecay || e.WordEmb.W.NoDecay || l.Inter.W.NoDecay {
		t.Fatal("NoDecay flags wrong")
	}
	// Seeded: same seed, same weights; another seed, other weights.
	e2, _ := New(cfg, newRng(5))
	e3, _ := New(cfg, newRng(6))
	if e2.Layers[1].Out.W.Value.Data[100] != l.Out.W.Value.Data[100] || e3.Layers[1].Out.W.Value.Data[100] == l.Out.W.Value.Data[100] {
		t.Fatal("initialisation not seeded")
	}
	// RoBERTa: the padding row of the position embeddings is zero too.
	rc := tinyConfig("roberta")
	re, _ := New(rc, newRng(5))
	for j := 0; j < rc.HiddenSize; j++ {
		if re.PosEmb.W.Value.Data[rc.PadTokenID*rc.HiddenSize+j] != 0 || re.WordEmb.W.Value.Data[rc.PadTokenID*rc.HiddenSize+j] != 0 {
			t.Fatal("roberta padding rows not zero")
		}
	}
}

func TestCheckInput(t *testing.T) {
	cfg := tinyConfig("bert")
	e := newZero(cfg)
	good := tinyInput(cfg)
	tests := []struct {
		mod  func(*Input)
		want string
	}{
		{func(in *Input) { in.IDs[4] = 13 }, "row 0 position 4: token id 13"},
		{func(in *Input) { in.IDs[7] = -1 }, "row 1 position 1"},
		{func(in *Input) { in.TypeIDs[2] = 2 }, "token type id 2"},
		{func(in *Input) { in.Mask[3] = 0.5 }, "mask value 0.5"},
		{func(in *Input) { copy(in.Mask[6:], make([]float32, 6)) }, "row 1 has no real token"},
		{func(in *Input) { in.IDs = in.IDs[:11] }, "11 ids"},
		{func(in *Input) { in.S, in.B = 12, 1 }, "sequence length 12 exceeds"},
	}
	for _, tc := range tests {
		in := good
		in.IDs = append([]int32(nil), good.IDs...)
		in.TypeIDs = append([]int32(nil), good.TypeIDs...)
		in.Mask = append([]float32(nil), good.Mask...)
		tc.mod(&in)
		if err := e.CheckInput(in); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("CheckInput error %v, want %q", err, tc.want)
		}
	}
	if err := e.CheckInput(good); err != nil {
		t.Fatal(err)
	}
}
