package audio

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
)

// NormEps is the variance floor of Normalize: transformers'
// Wav2Vec2FeatureExtractor.zero_mean_unit_var_norm divides by
// sqrt(var + 1e-7).
const NormEps = 1e-7

// NoCrop is Extractor.MaxSamples for keeping every sample.
const NoCrop = -1

// Normalize scales x in place to zero mean and unit variance,
// (x - mean) / sqrt(var + NormEps) with the population variance, as the
// Wav2Vec2FeatureExtractor does per utterance when do_normalize is set
// (zero_mean_unit_var_norm, over the real samples only: call it on the
// unpadded waveform). Statistics are accumulated in float64 (transformers:
// numpy float32). Errors: an empty x.
func Normalize(x []float32) error {
	if len(x) == 0 {
		return errors.New("audio: normalising an empty waveform")
	}
	normalize(x)
	return nil
}

// normalize is Normalize of a non-empty x.
func normalize(x []float32) {
	mean := 0.0
	for _, v := range x {
		mean += float64(v)
	}
	mean /= float64(len(x))
	variance := 0.0
	for _, v := range x {
		d := float64(v) - mean
		variance += d * d
	}
	variance /= float64(len(x))
	scale := 1 / math.Sqrt(variance+NormEps)
	for i, v := range x {
		x[i] = float32((float64(v) - mean) * scale)
	}
}

// Extractor is the Wav2Vec2FeatureExtractor's batching of 16 kHz
// waveforms: crop, normalise, right-pad with zeros (padding_value 0.0) and
// the sample-level attention_mask. Make one with DefaultExtractor.
type Extractor struct {
	// MaxSamples crops each waveform to its first MaxSamples samples
	// (transformers' truncation=True, max_length); NoCrop keeps them all.
	MaxSamples int
	// Normalize applies Normalize to each cropped waveform's real samples
	// (do_normalize; true for wav2vec2-base and -large-lv60).
	Normalize bool
}

// DefaultExtractor returns Extractor{MaxSamples: NoCrop, Normalize: true},
// facebook/wav2vec2-base's preprocessor_config.json.
func DefaultExtractor() Extractor {
	return Extractor{MaxSamples: NoCrop, Normalize: true}
}

// Batch builds a Batch from waveforms at SampleRate:
// B = len(waves), T = the longest cropped waveform; row b holds waves[b]
// (cropped, normalised if e.Normalize) followed by zeros, and Mask[b, t] is
// 1 for its real samples, 0 for the padding. The inputs are not modified.
// Everything is checked before any work: errors name the waveform (no
// waveforms, an empty or non-finite waveform, MaxSamples neither > 0 nor
// NoCrop).
func (e Extractor) Batch(waves [][]float32) (Batch, error) {
	if e.MaxSamples <= 0 && e.MaxSamples != NoCrop {
		return Batch{}, fmt.Errorf("audio: max samples %d, want > 0 or NoCrop (%d)", e.MaxSamples, NoCrop)
	}
	if len(waves) == 0 {
		return Batch{}, errors.New("audio: batch of no waveforms")
	}
	T := 0
	for b, w := range waves {
		if len(w) == 0 {
			return Batch{}, fmt.Errorf("audio: waveform %d is empty", b)
		}
		for i, v := range w {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return Batch{}, fmt.Errorf("audio: waveform %d sample %d: non-finite value %v", b, i, v)
			}
		}
		T = max(T, e.length(w))
	}
	in := Batch{B: len(waves), T: T, Values: make([]float32, len(waves)*T), Mask: make([]float32, len(waves)*T)}
	for b, w := range waves {
		row := in.Values[b*T : b*T+e.length(w)]
		copy(row, w)
		if e.Normalize {
			normalize(row) // rows are non-empty: checked above
		}
		for t := range row {
			in.Mask[b*T+t] = 1
		}
	}
	return in, nil
}

// length is the number of samples of w that Batch keeps.
func (e Extractor) length(w []float32) int {
	if e.MaxSamples == NoCrop {
		return len(w)
	}
	return min(len(w), e.MaxSamples)
}

// Load reads the WAV file at path and returns its mono waveform at
// SampleRate (ReadWAV, Clip.Mono, Resample), ready for
// Extractor.Batch. Errors name the file (a sample rate outside
// MinSampleRate to MaxSampleRate among them). LoadCropped reads only the
// beginning a caller keeps.
func Load(path string) ([]float32, error) {
	x, _, err := LoadCropped(context.Background(), path, NoCrop)
	return x, err
}

// LoadCropped is Load keeping the first maxSamples samples (all of them
// with NoCrop), bit for bit Load(path)[:maxSamples], at a cost that grows
// with maxSamples, not with the file's length: the file is read, but only
// the input frames those samples depend on are decoded, mixed and
// resampled (maxSamples x rate / 16 kHz of them plus the resampling
// filter's reach beyond, at most 1,622 frames: 4.2 ms at 384 kHz). full is
// the length Load(path) would have, ceil(frames x 16000 / rate): full >
// maxSamples says the clip was cropped.
//
// ctx is checked before the file is read, before resampling and about
// every 2^18 filter taps while resampling (under a millisecond to about 50
// ms apart): once it is done, its error is returned wrapped, naming the
// file (errors.Is(err, context.Canceled)). Errors name the file: those of
// ReadWAV and DecodeWAV (a sample rate outside MinSampleRate to
// MaxSampleRate among them, refused before any sample is decoded; a
// non-finite float sample only among the frames decoded), maxSamples
// neither > 0 nor NoCrop.
func LoadCropped(ctx context.Context, path string, maxSamples int) (x []float32, full int, err error) {
	if maxSamples <= 0 && maxSamples != NoCrop {
		return nil, 0, fmt.Errorf("audio %s: max samples %d, want > 0 or NoCrop (%d)", path, maxSamples, NoCrop)
	}
	if err := ctx.Err(); err != nil {
		return nil, 0, fmt.Errorf("audio %s: %w", path, err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, 0, fmt.Errorf("audio: %w", err)
	}
	return loadCropped(ctx, data, path, maxSamples)
}

// loadCropped is LoadCropped of the file's contents data; name is used in
// errors.
func loadCropped(ctx context.Context, data []byte, name string, maxSamples int) ([]float32, int, error) {
	var limit func(rate int) int
	if maxSamples != NoCrop {
		limit = func(rate int) int { return resampleInput(maxSamples, rate, SampleRate) }
	}
	clip, frames, err := decodeWAV(data, name, limit)
	if err != nil {
		return nil, 0, err
	}
	if err := ctx.Err(); err != nil {
		return nil, 0, fmt.Errorf("audio %s: %w", name, err)
	}
	x, err := resample(ctx, clip.Mono(), clip.Rate, SampleRate, maxSamples)
	if err != nil {
		return nil, 0, fmt.Errorf("audio %s: %w", name, err)
	}
	return x, resampledLen(frames, clip.Rate, SampleRate), nil
}

// SampleRate is the waveform rate (Hz) of the speech encoder's input: every
// Wav2Vec2 checkpoint expects 16 kHz (the feature extractor's sampling_rate),
// and Load resamples every file to it.
const SampleRate = 16000

// Batch is a batch of waveforms, the speech encoder's input (wav2vec2.Model.Forward): Values [B, T] row-major (16 kHz samples,
// normalised by the caller as the feature extractor does), Mask [B, T]
// Hugging Face's attention_mask over samples (1 = real sample, 0 = padding;
// each row real samples first, then padding) or nil when every sample is real.
type Batch struct {
	Values []float32
	Mask   []float32
	B, T   int
}

// SampleLengths returns the number of real samples per row.
func (in Batch) SampleLengths() []int {
	n := make([]int, in.B)
	for b := range n {
		n[b] = in.T
		if in.Mask != nil {
			n[b] = 0
			for _, v := range in.Mask[b*in.T : (b+1)*in.T] {
				if v == 1 {
					n[b]++
				}
			}
		}
	}
	return n
}
