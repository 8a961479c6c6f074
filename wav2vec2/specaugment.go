package wav2vec2

import (
	"math/rand/v2"

	"github.com/nvdp-project/nvdp/nn"
)

// SpecAugment, as transformers' Wav2Vec2Model._mask_hidden_states in training, never at
// inference. It runs after the feature projection and its dropout, before the encoder:
//
//   - time masking, with apply_spec_augment and mask_time_prob > 0: the frames of spans of
//     mask_time_length frames, drawn per row by _compute_mask_indices over the row's real frames,
//     are replaced by the learned vector masked_spec_embed [hidden_size];
//   - feature masking, with mask_feature_prob > 0: spans of mask_feature_length channels, drawn
//     per row over hidden_size, are set to 0 in every frame of the row.
//
// The draws come from Forward's rng, where transformers draws from numpy's global generator: the
// same distribution, not the same masks.

// maskTime reports whether training masks frames (and trains
// masked_spec_embed).
func (c Config) maskTime() bool { return c.ApplySpecAugment && c.MaskTimeProb > 0 }

// maskFeatures reports whether training masks feature channels.
func (c Config) maskFeatures() bool { return c.ApplySpecAugment && c.MaskFeatureProb > 0 }

// hasSpecEmbed reports whether the model has masked_spec_embed
// (transformers creates it when either probability is > 0).
func (c Config) hasSpecEmbed() bool { return c.MaskTimeProb > 0 || c.MaskFeatureProb > 0 }

// MinTrainFrames is the fewest frames a training batch may have: time
// masking needs mask_time_length frames (transformers raises otherwise); 1
// without time masking.
func (c Config) MinTrainFrames() int {
	if c.maskTime() {
		return c.MaskTimeLength
	}
	return 1
}

// computeMaskIndices is transformers' _compute_mask_indices for shape
// [B, L] (a mask [B*L], true = masked): one epsilon ~ U[0, 1) for the batch;
// per row of input length n (lengths[b]; L when lengths is nil)
// int(prob*n/length + epsilon) spans, at least minMasks, at most L/length
// and at most n - length + 1; their starts a uniform draw without
// replacement from [0, n - length + 1), each span covering length
// positions (clipped to L - 1). As transformers: when the longest row
// allows no span nothing is masked, and a row that gets no span while
// others do has position L - 1 masked (its padding index).
func computeMaskIndices(rng *rand.Rand, B, L int, prob float64, length int, lengths []int, minMasks int) []bool {
	if length > L {
		panic("wav2vec2: SpecAugment span longer than the sequence (Config.MinTrainFrames)")
	}
	eps := rng.Float64()
	spans := func(n int) int {
		k := max(int(prob*float64(n)/float64(length)+eps), minMasks)
		if k*length > L {
			k = L / length
		}
		if n-(length-1) < k {
			k = max(n-(length-1), 0)
		}
		return k
	}
	mask := make([]bool, B*L)
	if spans(L) == 0 {
		return mask
	}
	for b := range B {
		n := L
		if lengths != nil {
			n = lengths[b]
		}
		k := spans(n)
		row := mask[b*L : (b+1)*L]
		if k == 0 {
			row[L-1] = true
			continue
		}
		for _, s := range rng.Perm(n - (length - 1))[:k] {
			for o := range length {
				row[min(s+o, L-1)] = true
			}
		}
	}
	return mask
}

// specCache holds the masks of a training Forward (nil slices: no masking).
type specCache struct {
	time []bool // [B*F]
	feat []bool // [B*H]
}

// specAugment masks h [B, F, H] in place (frameMask [B, F]: the real
// frames); nil when the configuration masks nothing.
func (m *Model) specAugment(h *nn.Tensor, frameMask []float32, B, F int, rng *rand.Rand) *specCache {
	cfg := m.Config
	if !cfg.maskTime() && !cfg.maskFeatures() {
		return nil
	}
	if rng == nil {
		panic("wav2vec2.Forward: SpecAugment in training needs an rng")
	}
	H := cfg.HiddenSize
	c := &specCache{}
	if cfg.maskTime() {
		lengths := make([]int, B)
		for i, v := range frameMask {
			if v == 1 {
				lengths[i/F]++
			}
		}
		c.time = computeMaskIndices(rng, B, F, cfg.MaskTimeProb, cfg.MaskTimeLength, lengths, cfg.MaskTimeMinMasks)
		for i, masked := range c.time {
			if masked {
				copy(h.Data[i*H:(i+1)*H], m.MaskedSpecEmbed.Value.Data)
			}
		}
	}
	if cfg.maskFeatures() {
		c.feat = computeMaskIndices(rng, B, H, cfg.MaskFeatureProb, cfg.MaskFeatureLength, nil, cfg.MaskFeatureMinMasks)
		zeroChannels(h, c.feat, B, F, H)
	}
	return c
}

// specAugmentBackward takes dL/d(masked h) [B, F, H] in place to dL/dh and
// accumulates masked_spec_embed's gradient: zero in the masked channels,
// then the masked frames' rows go to the embedding and are zeroed.
func (m *Model) specAugmentBackward(c *specCache, dh *nn.Tensor, B, F int) {
	H := m.Config.HiddenSize
	if c.feat != nil {
		zeroChannels(dh, c.feat, B, F, H)
	}
	if c.time != nil {
		g := m.MaskedSpecEmbed.Grad.Data
		for i, masked := range c.time {
			if masked {
				row := dh.Data[i*H : (i+1)*H]
				for j, v := range row {
					g[j] += v
				}
				clear(row)
			}
		}
	}
}

// zeroChannels sets x [B, F, H] to 0 in the channels feat [B*H] marks, in
// every frame of their row.
func zeroChannels(x *nn.Tensor, feat []bool, B, F, H int) {
	for b := range B {
		for t := range F {
			row := x.Data[(b*F+t)*H : (b*F+t+1)*H]
			for j, masked := range feat[b*H : (b+1)*H] {
				if masked {
					row[j] = 0
				}
			}
		}
	}
}
