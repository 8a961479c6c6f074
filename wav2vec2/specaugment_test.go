package wav2vec2

import (
	"math"
	"testing"
)

// runs returns the lengths of the runs of true in row.
func runs(row []bool) []int {
	var out []int
	n := 0
	for _, v := range row {
		if v {
			n++
			continue
		}
		if n > 0 {
			out = append(out, n)
		}
		n = 0
	}
	if n > 0 {
		out = append(out, n)
	}
	return out
}

func count(row []bool) int {
	n := 0
	for _, v := range row {
		if v {
			n++
		}
	}
	return n
}

// TestComputeMaskIndices checks transformers' _compute_mask_indices rules:
// the number of spans int(prob n/length + eps) with one eps per batch
// (mean k + 0.5 for prob n/length = k + 0.5), at least min_masks, capped at
// L/length; spans inside the row's real positions (runs of at least length,
// never clipped); a uniform start; a row too short for a span masks only
// position L-1 when other rows are masked; nothing when no row can be.
func TestComputeMaskIndices(t *testing.T) {
	rng := newRng(5)
	// Spans of one position never overlap: the masked count is the number
	// of spans, 10 or 11 (prob n/length = 10.5), the same in every row of a
	// batch (one eps), 10.5 on average.
	var total float64
	const batches = 4000
	for range batches {
		m := computeMaskIndices(rng, 3, 1000, 0.0105, 1, nil, 0)
		k := count(m[:1000])
		if (k != 10 && k != 11) || count(m[1000:2000]) != k || count(m[2000:]) != k {
			t.Fatalf("spans per row %d %d %d, want one of 10, 11 in every row", k, count(m[1000:2000]), count(m[2000:]))
		}
		total += float64(k)
	}
	if mean := total / batches; math.Abs(mean-10.5) > 0.05 {
		t.Errorf("mean spans %v, want 10.5 (epsilon uniform)", mean)
	}
	// Real lengths: spans stay inside [0, n); a row shorter than a span
	// gets the padding index L-1 only.
	for range 500 {
		m := computeMaskIndices(rng, 3, 50, 0.2, 5, []int{50, 30, 3}, 0)
		for b, n := range []int{50, 30} {
			row := m[b*50 : (b+1)*50]
			for i := n; i < 50; i++ {
				if row[i] {
					t.Fatalf("row %d (length %d) masked at %d", b, n, i)
				}
			}
			for _, r := range runs(row) {
				if r < 5 {
					t.Fatalf("row %d: a run of %d masked positions, spans are 5 long: %v", b, r, row)
				}
			}
			if c := count(row); c < 5 || c > 5*int(0.2*float64(n)/5+1) {
				t.Fatalf("row %d (length %d): %d masked", b, n, c)
			}
		}
		if row := m[100:]; count(row) != 1 || !row[49] {
			t.Fatalf("row of 3 real positions (span 5): masked %v, want position 49 only", row)
		}
	}
	// min_masks with prob 0; the cap L/length with prob 1.
	for range 200 {
		if c := count(computeMaskIndices(rng, 1, 50, 0, 5, nil, 2)); c < 5 || c > 10 {
			t.Fatalf("min_masks 2 of 5: %d masked", c)
		}
		m := computeMaskIndices(rng, 1, 25, 1, 10, nil, 0) // int(2.5 + eps) spans, capped at 25/10 = 2
		if c := count(m); c < 10 || c > 20 {
			t.Fatalf("capped at 2 spans of 10 in 25: %d masked", c)
		}
	}
	// One span of 5 in 20: its start is uniform over [0, 16).
	hist := make([]int, 16)
	const draws = 32000
	for range draws {
		m := computeMaskIndices(rng, 1, 20, 0, 5, nil, 1)
		for i, v := range m {
			if v {
				hist[i]++
				break
			}
		}
	}
	for s, c := range hist {
		if want := draws / 16; math.Abs(float64(c-want)) > 0.15*float64(want) {
			t.Errorf("span start %d drawn %d times, want about %d", s, c, want)
		}
	}
	// Nothing to mask when no row can hold a span.
	if c := count(computeMaskIndices(rng, 2, 8, 0, 8, []int{5, 7}, 0)); c != 0 {
		t.Errorf("prob 0, min_masks 0: %d masked", c)
	}
	defer func() {
		if recover() == nil {
			t.Error("a span longer than the sequence did not panic")
		}
	}()
	computeMaskIndices(rng, 1, 5, 0.5, 6, nil, 0)
}

// TestSpecAugmentTrainOnly: masking happens in training only, replaces the
// masked frames by masked_spec_embed before the encoder and zeroes the
// masked channels; inference and a configuration without it are untouched.
func TestSpecAugmentTrainOnly(t *testing.T) {
	cfg := tinyConfig(NormLayer)
	cfg.MaskTimeProb, cfg.MaskTimeLength, cfg.MaskTimeMinMasks = 0.3, 3, 1
	cfg.MaskFeatureProb, cfg.MaskFeatureLength = 0.2, 2
	m := tinyModel(t, cfg, 1)
	if m.MaskedSpecEmbed == nil || cfg.MinTrainFrames() != 3 {
		t.Fatalf("masked_spec_embed %v, min train frames %d", m.MaskedSpecEmbed, cfg.MinTrainFrames())
	}
	in := tinyInput(2, false)
	plain := tinyConfig(NormLayer)
	mp := tinyModel(t, plain, 1)
	// Same weights (masked_spec_embed is drawn last): inference agrees.
	y1, _, _ := m.Forward(in, false, nil)
	y2, _, _ := mp.Forward(in, false, nil)
	for i := range y1.Data {
		if y1.Data[i] != y2.Data[i] {
			t.Fatalf("inference differs with SpecAugment configured at %d: %v vs %v", i, y1.Data[i], y2.Data[i])
		}
	}
	yt, _, c := m.Forward(in, true, newRng(9))
	yp, _, _ := mp.Forward(in, true, newRng(9))
	diff := false
	for i := range yt.Data {
		diff = diff || yt.Data[i] != yp.Data[i]
	}
	if c.spec == nil || !diff {
		t.Fatal("training with SpecAugment masked nothing")
	}
	if mp.MaskedSpecEmbed != nil {
		t.Error("a configuration without masking has masked_spec_embed")
	}
	cfg.ApplySpecAugment = false
	if cfg.maskTime() || cfg.maskFeatures() || cfg.MinTrainFrames() != 1 {
		t.Error("apply_spec_augment false still masks")
	}
}
