package audio

import (
	"fmt"
	"math"
	"os"

	goaudio "github.com/go-audio/audio"
	"github.com/go-audio/wav"

	"github.com/nvdp-project/nvdp/internal/atomicfile"
)

// WriteWAV writes the mono waveform x at rate Hz to path as 16-bit PCM RIFF/WAVE, atomically, with
// github.com/go-audio/wav's encoder. Samples are scaled by 2^15, the inverse of ReadWAV's scaling,
// rounded to nearest and clipped to [-32768, 32767], so [ReadWAV] returns x to within 2^-16 where
// |x| < 1.
//
// WriteWAV returns an error for a rate outside [MinSampleRate] to [MaxSampleRate], the rates
// ReadWAV reads, since go-audio/wav's encoder panics above 1 GHz; for an empty or non-finite
// waveform; and for the file.
func WriteWAV(path string, x []float32, rate int) error {
	if rate < MinSampleRate || rate > MaxSampleRate {
		return fmt.Errorf("audio: %s: sample rate %d Hz is outside the accepted range %d Hz to %d Hz", path, rate, MinSampleRate, MaxSampleRate)
	}
	if len(x) == 0 {
		return fmt.Errorf("audio: %s: empty waveform", path)
	}
	data := make([]int, len(x))
	for i, v := range x {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return fmt.Errorf("audio: %s: sample %d is %v", path, i, v)
		}
		data[i] = int(max(-32768, min(32767, math.Round(float64(v)*32768))))
	}
	return atomicfile.WriteFile(path, func(f *os.File) error {
		enc := wav.NewEncoder(f, rate, 16, 1, formatPCM)
		buf := &goaudio.IntBuffer{Format: &goaudio.Format{NumChannels: 1, SampleRate: rate}, Data: data, SourceBitDepth: 16}
		if err := enc.Write(buf); err != nil {
			return fmt.Errorf("audio: %s: %w", path, err)
		}
		if err := enc.Close(); err != nil {
			return fmt.Errorf("audio: %s: %w", path, err)
		}
		return nil
	})
}
