// Package audio turns audio files into the waveforms a Wav2Vec2 encoder takes, as "Audio" in
// docs/speech.md describes. It reads WAV files, in 8, 16, 24 or 32-bit PCM or 32 or 64-bit IEEE
// float, plain or WAVE_FORMAT_EXTENSIBLE; mixes to mono; resamples band-limited to [SampleRate];
// applies the Wav2Vec2FeatureExtractor's per-utterance normalisation; and makes right-padded
// batches, of type [Batch].
package audio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"

	"github.com/go-audio/wav"
)

// The sample rates this package reads, in Hz, both included. [DecodeWAV], and hence [ReadWAV],
// [Load] and [LoadCropped], refuses a file whose fmt chunk claims a rate outside [MinSampleRate,
// MaxSampleRate], naming the file, the rate and this range.
//
// 1 kHz is well below any recording of speech; telephone speech is sampled at 8 kHz. 384 kHz is
// the highest rate of professional audio converters, DXD. A rate outside is a corrupt header or not
// audio, and resampling it to 16 kHz is harmful either way: a clip of 0.3 s of 16 kHz samples
// claiming 1 Hz would become 77 million output samples, about 10 minutes of resampling, and one
// claiming 4 GHz a single sample.
const (
	MinSampleRate = 1_000
	MaxSampleRate = 384_000
)

// WAVE format tags, from mmreg.h, that this package decodes.
const (
	formatPCM        = 1
	formatFloat      = 3
	formatExtensible = 0xFFFE
)

// Clip is a decoded recording: Channels[c][i] is sample i of channel c. Integer PCM is scaled to
// [-1, 1) as value / 2^(bits-1), with unsigned 8-bit centred first, as libsndfile and soundfile read
// it; IEEE float is kept as stored. Every channel has the same length. Rate is in Hz.
type Clip struct {
	Channels [][]float32
	Rate     int
}

// Len returns the number of sample frames, that is samples per channel.
func (c Clip) Len() int {
	if len(c.Channels) == 0 {
		return 0
	}
	return len(c.Channels[0])
}

// Mono returns the mean over channels of each sample frame, accumulated in float64. This is what
// 🤗 datasets' Audio feature does with mono=True: librosa's to_mono, the mean over the channel axis.
func (c Clip) Mono() []float32 {
	out := make([]float32, c.Len())
	if len(c.Channels) == 1 {
		copy(out, c.Channels[0])
		return out
	}
	for i := range out {
		s := 0.0
		for _, ch := range c.Channels {
			s += float64(ch[i])
		}
		out[i] = float32(s / float64(len(c.Channels)))
	}
	return out
}

// ReadWAV reads the WAV file at path; see [DecodeWAV]. Errors name the file.
func ReadWAV(path string) (Clip, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Clip{}, fmt.Errorf("audio: %w", err)
	}
	return DecodeWAV(data, path)
}

// DecodeWAV decodes a RIFF/WAVE file held in data. name is used in errors: a path, or a description
// of where data came from.
//
// The RIFF structure is checked first, against len(data). Every chunk must fit in the file, so a
// data chunk longer than the bytes present is a truncated file, and there must be a fmt chunk of at
// least 16 bytes before the data chunk. github.com/go-audio/wav then reads the format, that is the
// channels, rate, bit depth and format tag, from the fmt chunk and the data chunk's header alone.
// Other chunks are skipped unread, since the library allocates the sizes a LIST entry declares. The
// samples are decoded here, since the library, at v1.1.0, decodes IEEE float samples as integers
// and returns short data chunks without an error.
//
// DecodeWAV returns an error for data that is not RIFF/WAVE or is truncated; zero channels; a zero
// rate or a rate outside [MinSampleRate] to [MaxSampleRate]; an unsupported format or bit depth; a
// block alignment that disagrees with channels x bytes per sample; no samples; or a non-finite
// float sample.
func DecodeWAV(data []byte, name string) (Clip, error) {
	clip, _, err := decodeWAV(data, name, nil)
	return clip, err
}

// decodeWAV is DecodeWAV decoding only the first limit(rate) sample frames
// when limit is not nil (all of them when it returns more); frames is the
// number of whole frames in the data chunk, decoded or not. Every check of
// DecodeWAV runs, the non-finite samples' only on the frames decoded.
func decodeWAV(data []byte, name string, limit func(rate int) int) (clip Clip, frames int, err error) {
	fail := func(format string, args ...any) (Clip, int, error) {
		return Clip{}, 0, fmt.Errorf("audio %s: %s", name, fmt.Sprintf(format, args...))
	}
	layout, err := walkRIFF(data)
	if err != nil {
		return Clip{}, 0, fmt.Errorf("audio %s: %w", name, err)
	}
	// The library sees the fmt chunk and the data chunk's header only: it
	// would parse LIST and smpl chunks on the way, allocating whatever
	// sizes they declare inside.
	hdr := append([]byte("RIFF\x00\x00\x00\x00WAVE"), data[layout.fmtOffset-8:layout.fmtOffset+layout.fmtSize+layout.fmtSize%2]...)
	hdr = append(hdr, data[layout.dataOffset-8:layout.dataOffset]...)
	d := wav.NewDecoder(bytes.NewReader(hdr))
	d.ReadInfo()
	if err := d.Err(); err != nil {
		return fail("reading the fmt chunk: %v", err)
	}
	tag := d.WavAudioFormat
	if tag == formatExtensible {
		// The library drops the extension; its SubFormat GUID starts with the tag.
		if layout.fmtSize < 26 {
			return fail("WAVE_FORMAT_EXTENSIBLE fmt chunk of %d bytes has no SubFormat", layout.fmtSize)
		}
		tag = binary.LittleEndian.Uint16(data[layout.fmtOffset+24:])
	}
	channels, rate, bits := int(d.NumChans), int(d.SampleRate), int(d.BitDepth)
	switch {
	case channels == 0:
		return fail("zero channels")
	case rate == 0:
		return fail("zero sample rate")
	case rate < MinSampleRate || rate > MaxSampleRate:
		return fail("sample rate %d Hz is outside the accepted range %d Hz to %d Hz (a corrupt header, or not audio)", rate, MinSampleRate, MaxSampleRate)
	case tag == formatPCM && bits != 8 && bits != 16 && bits != 24 && bits != 32:
		return fail("%d-bit PCM, want 8, 16, 24 or 32", bits)
	case tag == formatFloat && bits != 32 && bits != 64:
		return fail("%d-bit IEEE float, want 32 or 64", bits)
	case tag != formatPCM && tag != formatFloat:
		return fail("format tag %#x, want PCM (1) or IEEE float (3)", tag)
	}
	width := bits / 8
	if align := int(binary.LittleEndian.Uint16(data[layout.fmtOffset+12:])); align != channels*width {
		return fail("block align %d, want %d channels x %d bytes", align, channels, width)
	}
	if err := d.FwdToPCM(); err != nil || d.PCMChunk == nil {
		return fail("locating the data chunk: %v", err)
	}
	frames = layout.dataSize / (channels * width)
	if frames == 0 {
		return fail("no samples (data chunk of %d bytes)", layout.dataSize)
	}
	n := frames
	if limit != nil {
		n = max(1, min(n, limit(rate)))
	}
	pcm := data[layout.dataOffset : layout.dataOffset+n*channels*width]
	clip = Clip{Channels: make([][]float32, channels), Rate: rate}
	for c := range clip.Channels {
		clip.Channels[c] = make([]float32, n)
	}
	for i := range n {
		for c, ch := range clip.Channels {
			b := pcm[(i*channels+c)*width:]
			v, ok := decodeSample(b, tag, bits)
			if !ok {
				return fail("frame %d channel %d: non-finite sample", i, c)
			}
			ch[i] = v
		}
	}
	return clip, frames, nil
}

// decodeSample decodes one little-endian sample at the start of b; ok is
// false for a non-finite float.
func decodeSample(b []byte, tag uint16, bits int) (float32, bool) {
	switch {
	case tag == formatFloat && bits == 32:
		v := math.Float32frombits(binary.LittleEndian.Uint32(b))
		return v, !math.IsNaN(float64(v)) && !math.IsInf(float64(v), 0)
	case tag == formatFloat:
		v := math.Float64frombits(binary.LittleEndian.Uint64(b))
		return float32(v), !math.IsNaN(v) && !math.IsInf(v, 0) && math.Abs(v) <= math.MaxFloat32
	case bits == 8:
		return float32(int(b[0])-128) / (1 << 7), true
	case bits == 16:
		return float32(int16(binary.LittleEndian.Uint16(b))) / (1 << 15), true
	case bits == 24:
		v := int32(uint32(b[0])<<8|uint32(b[1])<<16|uint32(b[2])<<24) >> 8
		return float32(float64(v) / (1 << 23)), true
	default:
		return float32(float64(int32(binary.LittleEndian.Uint32(b))) / (1 << 31)), true
	}
}

// riffLayout locates the fmt and data chunks' contents in a WAV file.
type riffLayout struct {
	fmtOffset, fmtSize   int
	dataOffset, dataSize int
}

// errNotWAV is wrapped by DecodeWAV's error for data that is not RIFF/WAVE.
var errNotWAV = errors.New("not a RIFF/WAVE file")

// walkRIFF checks the chunk structure of data before any library reads it:
// the "RIFF....WAVE" header, chunk headers and sizes within len(data), an
// fmt chunk of at least 16 bytes before the first data chunk. The RIFF
// size field is not checked (streaming writers leave it 0 or 0xFFFFFFFF).
func walkRIFF(data []byte) (riffLayout, error) {
	var l riffLayout
	if len(data) < 12 || string(data[:4]) != "RIFF" || string(data[8:12]) != "WAVE" {
		if len(data) == 0 {
			return l, fmt.Errorf("empty file: %w", errNotWAV)
		}
		return l, errNotWAV
	}
	for off := 12; ; {
		if off+8 > len(data) {
			if l.fmtSize == 0 {
				return l, errors.New("truncated: no fmt chunk")
			}
			return l, errors.New("truncated: no data chunk")
		}
		id, size := string(data[off:off+4]), int(binary.LittleEndian.Uint32(data[off+4:]))
		body := off + 8
		if size > len(data)-body {
			return l, fmt.Errorf("truncated: chunk %q at byte %d declares %d bytes, %d present", id, off, size, len(data)-body)
		}
		switch id {
		case "fmt ":
			if size < 16 {
				return l, fmt.Errorf("fmt chunk of %d bytes, want at least 16", size)
			}
			l.fmtOffset, l.fmtSize = body, size
		case "data":
			if l.fmtSize == 0 {
				return l, errors.New("data chunk before the fmt chunk")
			}
			l.dataOffset, l.dataSize = body, size
			return l, nil
		}
		off = body + size + size%2 // chunks are word aligned
	}
}
