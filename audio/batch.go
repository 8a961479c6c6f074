package audio

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
)

// NormEps is the variance floor of [Normalize]: transformers'
// Wav2Vec2FeatureExtractor.zero_mean_unit_var_norm divides by sqrt(var + 1e-7).
const NormEps = 1e-7

// NoCrop is the [Extractor].MaxSamples that keeps every sample.
const NoCrop = -1

// Normalize scales x in place to zero mean and unit variance, (x - mean) / sqrt(var + NormEps) with
// the population variance. The Wav2Vec2FeatureExtractor does the same per utterance when
// do_normalize is set, in zero_mean_unit_var_norm, over the real samples only, so call it on the
// unpadded waveform. The statistics are accumulated in float64, where transformers uses numpy
// float32. It returns an error for an empty x.
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

// Extractor is the Wav2Vec2FeatureExtractor's batching of 16 kHz waveforms: it crops, normalises,
// right-pads with zeros, padding_value 0.0, and makes the sample-level attention_mask. Make one with
// [DefaultExtractor].
type Extractor struct {
	// MaxSamples crops each waveform to its first MaxSamples samples, as transformers'
	// truncation=True with max_length; [NoCrop] keeps them all.
	MaxSamples int
	// Normalize applies [Normalize] to each cropped waveform's real samples, as do_normalize does;
	// it is true for wav2vec2-base and -large-lv60.
	Normalize bool
}

// DefaultExtractor returns Extractor{MaxSamples: NoCrop, Normalize: true}, the settings of
// facebook/wav2vec2-base's preprocessor_config.json.
func DefaultExtractor() Extractor {
	return Extractor{MaxSamples: NoCrop, Normalize: true}
}

// Batch builds a Batch from waveforms at [SampleRate]. B = len(waves) and T is the longest cropped
// waveform. Row b holds waves[b], cropped and normalised if e.Normalize is set, followed by zeros;
// Mask[b, t] is 1 for its real samples and 0 for the padding. The inputs are not modified.
//
// Everything is checked before any work. The errors name the waveform: no waveforms, an empty or
// non-finite waveform, or a MaxSamples neither positive nor NoCrop.
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

// Load reads the WAV file at path and returns its mono waveform at [SampleRate], through [ReadWAV],
// [Clip.Mono] and [Resample], ready for [Extractor.Batch]. Errors name the file; a sample rate
// outside [MinSampleRate] to [MaxSampleRate] is one of them. [LoadCropped] reads only the beginning
// a caller keeps.
func Load(path string) ([]float32, error) {
	x, _, err := LoadCropped(context.Background(), path, NoCrop)
	return x, err
}

// LoadCropped is [Load] keeping the first maxSamples samples, or all of them with [NoCrop]. The
// result is Load(path)[:maxSamples] bit for bit, at a cost that grows with maxSamples rather than
// with the file's length: the file is read, but only the input frames those samples depend on are
// decoded, mixed and resampled. They are maxSamples x rate / 16 kHz frames plus the resampling
// filter's reach beyond, at most 1,622 frames, 4.2 ms at 384 kHz. full is the length Load(path)
// would have, ceil(frames x 16000 / rate); full > maxSamples says the clip was cropped.
//
// ctx is checked before the file is read, before resampling, and about every 2^18 filter taps while
// resampling, which is under a millisecond to about 50 ms apart. Once it is done, its error is
// returned wrapped, naming the file, so that errors.Is(err, context.Canceled) holds.
//
// The errors name the file. They are those of [ReadWAV] and [DecodeWAV], among them a sample rate
// outside [MinSampleRate] to [MaxSampleRate], refused before any sample is decoded, and a
// non-finite float sample, found only among the frames decoded; and a maxSamples neither positive
// nor NoCrop.
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

// SampleRate is the waveform rate, in Hz, of the speech encoder's input. Every Wav2Vec2 checkpoint
// expects 16 kHz, the feature extractor's sampling_rate, and [Load] resamples every file to it.
const SampleRate = 16000

// Batch is a batch of waveforms, the speech encoder's input to wav2vec2.Model.Forward. Values
// [B, T] holds 16 kHz samples in row-major order, normalised by the caller as the feature extractor
// does. Mask [B, T] is Hugging Face's attention_mask over samples, with 1 for a real sample and 0
// for padding, each row holding its real samples first; it is nil when every sample is real.
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
