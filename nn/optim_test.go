package nn_test

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/nn"
)

// TestAdamWTwoSteps compares with values computed by hand with
// torch.optim.AdamW's update order (decay, moments, bias-corrected step).
func TestAdamWTwoSteps(t *testing.T) {
	w := nn.NewParam("w", 2)
	copy(w.Value.Data, []float32{1, -2})
	b := nn.NewParam("b", 1)
	b.Value.Data[0] = 0.5
	b.NoDecay = true
	ps := []*nn.Param{w, b}
	opt := nn.NewAdamW(0.1, 0.9, 0.999, 1e-8, 0.01)
	steps := []struct {
		lr    float64
		grads []float32
		want  []float64
	}{
		{0.1, []float32{0.5, -1, 3}, []float64{0.8990000020, -1.8980000010, 0.4000000003}},
		{0.05, []float32{-0.25, 2, -1}, []float64{0.8852336504, -1.9153561772, 0.3799890718}},
	}
	for s, st := range steps {
		copy(w.Grad.Data, st.grads[:2])
		b.Grad.Data[0] = st.grads[2]
		opt.Update(ps, st.lr)
		got := []float32{w.Value.Data[0], w.Value.Data[1], b.Value.Data[0]}
		for i, want := range st.want {
			if math.Abs(float64(got[i])-want) > 2e-7*math.Max(1, math.Abs(want)) {
				t.Errorf("step %d: param %d = %.9f, want %.9f", s+1, i, got[i], want)
			}
		}
	}
	if opt.Step != 2 {
		t.Errorf("Step = %d, want 2", opt.Step)
	}
	if m := opt.M["w"][1]; math.Abs(float64(m)-0.11) > 1e-7 {
		t.Errorf("m[w][1] = %v, want 0.11", m)
	}
	if v := opt.V["b"][0]; math.Abs(float64(v)-0.009991) > 1e-9 {
		t.Errorf("v[b][0] = %v, want 0.009991", v)
	}
}

func TestLinearWarmupDecay(t *testing.T) {
	for _, tc := range []struct {
		step, warm, total int
		want              float64
	}{
		{0, 10, 110, 0}, {5, 10, 110, 0.5}, {10, 10, 110, 1}, {60, 10, 110, 0.5},
		{110, 10, 110, 0}, {200, 10, 110, 0}, {0, 0, 100, 1}, {25, 0, 100, 0.75},
	} {
		if got := nn.LinearWarmupDecay(tc.step, tc.warm, tc.total); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("LinearWarmupDecay(%d, %d, %d) = %v, want %v", tc.step, tc.warm, tc.total, got, tc.want)
		}
	}
}

func TestClipGradNorm(t *testing.T) {
	p := nn.NewParam("p", 2)
	copy(p.Grad.Data, []float32{3, 4})
	if n := nn.ClipGradNorm([]*nn.Param{p}, 10); n != 5 || p.Grad.Data[0] != 3 {
		t.Fatalf("no-op clip changed grads: norm %v grads %v", n, p.Grad.Data)
	}
	if n := nn.ClipGradNorm([]*nn.Param{p}, 1); n != 5 {
		t.Fatalf("norm = %v, want 5", n)
	}
	if math.Abs(float64(p.Grad.Data[0])-0.6) > 1e-6 || math.Abs(float64(p.Grad.Data[1])-0.8) > 1e-6 {
		t.Fatalf("clipped grads %v, want [0.6 0.8]", p.Grad.Data)
	}
}

// tinyModel is a miniature encoder-classifier exercising every layer.
type tinyModel struct {
	emb        *nn.Embedding
	ln         *nn.LayerNorm
	q, k, v, o *nn.Linear
	head       *nn.Linear
}

const (
	tmVocab, tmDim, tmHeads, tmClasses, tmB, tmS = 17, 8, 2, 3, 4, 6
)

func newTinyModel(seed uint64) *tinyModel {
	rng := rand.New(rand.NewPCG(seed, 1))
	m := &tinyModel{
		emb: nn.NewEmbedding("emb", tmVocab, tmDim), ln: nn.NewLayerNorm("ln", tmDim, 1e-12),
		q: nn.NewLinear("q", tmDim, tmDim, true), k: nn.NewLinear("k", tmDim, tmDim, true),
		v: nn.NewLinear("v", tmDim, tmDim, true), o: nn.NewLinear("o", tmDim, tmDim, true),
		head: nn.NewLinear("head", tmDim, tmClasses, true),
	}
	m.emb.InitHF(rng, 0.5)
	for _, l := range []*nn.Linear{m.q, m.k, m.v, m.o, m.head} {
		l.InitHF(rng, 0.3)
	}
	return m
}

func (m *tinyModel) params() []*nn.Param {
	ps := append(m.emb.Params(), m.ln.Params()...)
	for _, l := range []*nn.Linear{m.q, m.k, m.v, m.o, m.head} {
		ps = append(ps, l.Params()...)
	}
	return ps
}

// batch returns the data of a step (a deterministic function of the step, as a seeded data order).
func batch(step int) (ids []int32, mask []float32, labels []int) {
	r := rand.New(rand.NewPCG(uint64(step), 77))
	ids, mask, labels = make([]int32, tmB*tmS), make([]float32, tmB*tmS), make([]int, tmB)
	for b := 0; b < tmB; b++ {
		n := 2 + r.IntN(tmS-1)
		for s := 0; s < n; s++ {
			ids[b*tmS+s] = int32(1 + r.IntN(tmVocab-1))
			mask[b*tmS+s] = 1
		}
		labels[b] = int(ids[b*tmS]) % tmClasses
	}
	return
}

// step runs forward, backward, clipping and AdamW; it returns the loss.
func (m *tinyModel) step(opt *nn.AdamW, dropRng *rand.Rand, step, total int) float64 {
	ids, mask, labels := batch(step)
	drop := nn.Dropout{P: 0.1}
	ps := m.params()
	nn.ZeroGrads(ps)
	e := m.emb.Forward(ids, tmB, tmS)
	h, lnc := m.ln.Forward(e)
	q, qc := m.q.Forward(h)
	k, kc := m.k.Forward(h)
	v, vc := m.v.Forward(h)
	a, ac := nn.AttentionDropout(q, k, v, tmHeads, nn.PaddingBias(mask, tmB, tmS), 0.1, dropRng, true)
	o, oc := m.o.Forward(a)
	g := nn.GELU(o)
	d, dc := drop.Forward(g, dropRng, true)
	pooled := nn.MaskedMeanPool(d, mask)
	logits, hc := m.head.Forward(pooled)
	loss, dl := nn.SoftmaxCrossEntropy(logits, labels)

	dd := nn.MaskedMeanPoolBackward(mask, m.head.Backward(hc, dl), tmS)
	da := m.o.Backward(oc, nn.GELUBackward(o, drop.Backward(dc, dd)))
	dq, dk, dv, _ := nn.AttentionBackward(ac, da)
	dh := m.q.Backward(qc, dq)
	nn.AddInPlace(dh, m.k.Backward(kc, dk))
	nn.AddInPlace(dh, m.v.Backward(vc, dv))
	m.emb.Backward(ids, m.ln.Backward(lnc, dh))
	nn.ClipGradNorm(ps, 1)
	opt.Update(ps, opt.LR*nn.LinearWarmupDecay(step, 3, total))
	return loss
}

// TestResumeBitwise trains 2K steps straight and K steps + checkpoint +
// reload into fresh objects + K steps, and requires identical parameters,
// optimizer state and dropout RNG stream.
func TestResumeBitwise(t *testing.T) {
	const K = 15
	total := 2 * K
	// Uninterrupted run.
	ref := newTinyModel(1)
	refOpt := nn.NewAdamW(0.05, 0.9, 0.999, 1e-8, 0.01)
	refSrc := rand.NewPCG(42, 43)
	refRng := rand.New(refSrc)
	var first, last float64
	for s := 0; s < total; s++ {
		l := ref.step(refOpt, refRng, s, total)
		if s < 5 {
			first += l / 5
		}
		if s >= total-5 {
			last += l / 5
		}
	}
	t.Logf("mean loss of the first 5 steps %.4f, of the last 5 %.4f", first, last)
	if !(last < first) {
		t.Errorf("mean loss did not decrease: %v -> %v", first, last)
	}

	// Interrupted run.
	dir := t.TempDir()
	path := filepath.Join(dir, "ckpt.safetensors")
	{
		m := newTinyModel(1)
		opt := nn.NewAdamW(0.05, 0.9, 0.999, 1e-8, 0.01)
		src := rand.NewPCG(42, 43)
		rng := rand.New(src)
		for s := 0; s < K; s++ {
			m.step(opt, rng, s, total)
		}
		state, err := nn.RNGState(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := nn.SaveCheckpoint(path, m.params(), opt, map[string]string{"rng": state, "next_step": strconv.Itoa(K)}); err != nil {
			t.Fatal(err)
		}
	}
	m := newTinyModel(999) // different init: everything must come from the checkpoint
	opt := nn.NewAdamW(0.05, 0.9, 0.999, 1e-8, 0.01)
	meta, err := nn.LoadCheckpoint(path, m.params(), opt)
	if err != nil {
		t.Fatal(err)
	}
	src := rand.NewPCG(0, 0)
	if err := nn.RestoreRNG(meta["rng"], src); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(src)
	next, _ := strconv.Atoi(meta["next_step"])
	if next != K || opt.Step != K {
		t.Fatalf("meta next_step %d, opt.Step %d, want %d", next, opt.Step, K)
	}
	for s := next; s < total; s++ {
		m.step(opt, rng, s, total)
	}
	for i, p := range m.params() {
		rp := ref.params()[i]
		for j := range p.Value.Data {
			if math.Float32bits(p.Value.Data[j]) != math.Float32bits(rp.Value.Data[j]) {
				t.Fatalf("%s[%d]: resumed %v, uninterrupted %v", p.Name, j, p.Value.Data[j], rp.Value.Data[j])
			}
		}
		for j := range opt.V[p.Name] {
			if opt.M[p.Name][j] != refOpt.M[p.Name][j] || opt.V[p.Name][j] != refOpt.V[p.Name][j] {
				t.Fatalf("%s: moments differ at %d", p.Name, j)
			}
		}
	}
	if rng.Uint64() != refRng.Uint64() {
		t.Fatal("dropout RNG streams differ after resume")
	}
}

func TestCheckpointErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.safetensors")
	m := newTinyModel(3)
	opt := nn.NewAdamW(0.01, 0.9, 0.999, 1e-8, 0)
	if err := nn.SaveCheckpoint(path, m.params(), opt, map[string]string{"nn.step": "1"}); err == nil || !strings.Contains(err.Error(), "reserved") {
		t.Fatalf("reserved metadata key: err = %v", err)
	}
	if err := nn.SaveCheckpoint(path, m.params(), nil, nil); err != nil {
		t.Fatal(err)
	}
	other := nn.NewParam("extra.weight", 2)
	mis := nn.NewParam("ln.weight", 9)
	for _, tc := range []struct {
		name   string
		params []*nn.Param
		opt    *nn.AdamW
		want   string
	}{
		{"missing param", append(newTinyModel(3).params(), other), nil, `"extra.weight" missing`},
		{"extra tensor", newTinyModel(3).params()[1:], nil, `"emb.weight" matches no model parameter`},
		{"shape", append(newTinyModel(3).params()[:1], append([]*nn.Param{mis}, newTinyModel(3).params()[2:]...)...), nil, `"ln.weight" has shape [8]`},
		{"no optimizer state", newTinyModel(3).params(), nn.NewAdamW(0.01, 0.9, 0.999, 1e-8, 0), "no AdamW state"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := make([][]float32, len(tc.params))
			for i, p := range tc.params {
				before[i] = append([]float32(nil), p.Value.Data...)
			}
			_, err := nn.LoadCheckpoint(path, tc.params, tc.opt)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
			for i, p := range tc.params {
				for j := range p.Value.Data {
					if p.Value.Data[j] != before[i][j] {
						t.Fatalf("failed load modified %s", p.Name)
					}
				}
			}
		})
	}
	// Weights-only load of a full checkpoint ignores the optimizer tensors.
	full := filepath.Join(dir, "full.safetensors")
	if err := nn.SaveCheckpoint(full, m.params(), opt, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := nn.LoadCheckpoint(full, newTinyModel(4).params(), nil); err != nil {
		t.Fatalf("weights-only load: %v", err)
	}
	// Atomic write leaves no temporary files behind.
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
	// Truncated file: clear error.
	data, _ := os.ReadFile(full)
	bad := filepath.Join(dir, "bad.safetensors")
	os.WriteFile(bad, data[:len(data)-10], 0o644)
	if _, err := nn.LoadCheckpoint(bad, m.params(), opt); err == nil {
		t.Fatal("truncated checkpoint loaded without error")
	}
}
