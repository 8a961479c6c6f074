package audio

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	goaudio "github.com/go-audio/audio"
	"github.com/go-audio/wav"
)

// wavFile builds a WAV file: a fmt chunk (tag, channels, rate, bits; the
// block align channels*bits/8 unless align >= 0; the extensible layout with
// its SubFormat when tag is formatExtensible, sub giving the real tag) and
// a data chunk holding payload.
type wavFile struct {
	tag, sub        uint16
	channels, rate  int
	bits, align     int
	payload         []byte
	dataFirst, junk bool // a data chunk before fmt; a LIST chunk before fmt
}

func (w wavFile) bytes() []byte {
	le := binary.LittleEndian
	fmtChunk := le.AppendUint16(nil, w.tag)
	fmtChunk = le.AppendUint16(fmtChunk, uint16(w.channels))
	fmtChunk = le.AppendUint32(fmtChunk, uint32(w.rate))
	align := w.channels * w.bits / 8
	if w.align >= 0 {
		align = w.align
	}
	fmtChunk = le.AppendUint32(fmtChunk, uint32(w.rate*align))
	fmtChunk = le.AppendUint16(fmtChunk, uint16(align))
	fmtChunk = le.AppendUint16(fmtChunk, uint16(w.bits))
	if w.tag == formatExtensible {
		fmtChunk = le.AppendUint16(fmtChunk, 22)
		fmtChunk = le.AppendUint16(fmtChunk, uint16(w.bits))
		fmtChunk = le.AppendUint32(fmtChunk, 0)
		fmtChunk = le.AppendUint16(fmtChunk, w.sub)
		fmtChunk = append(fmtChunk, "\x00\x00\x00\x00\x10\x00\x80\x00\x00\xAA\x00\x38\x9B\x71"...)
	}
	chunk := func(id string, body []byte) []byte {
		c := le.AppendUint32([]byte(id), uint32(len(body)))
		c = append(c, body...)
		if len(body)%2 == 1 {
			c = append(c, 0)
		}
		return c
	}
	var body []byte
	if w.junk {
		body = append(body, chunk("LIST", []byte("INFOISFT\x03\x00\x00\x00go\x00\x00"))...)
	}
	if w.dataFirst {
		body = append(body, chunk("data", w.payload)...)
		body = append(body, chunk("fmt ", fmtChunk)...)
	} else {
		body = append(body, chunk("fmt ", fmtChunk)...)
		body = append(body, chunk("data", w.payload)...)
	}
	out := le.AppendUint32([]byte("RIFF"), uint32(4+len(body)))
	return append(append(out, "WAVE"...), body...)
}

func pcm16(vs ...int16) []byte {
	var b []byte
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint16(b, uint16(v))
	}
	return b
}

func TestDecodeWAV(t *testing.T) {
	le := binary.LittleEndian
	f32 := func(vs ...float32) (b []byte) {
		for _, v := range vs {
			b = le.AppendUint32(b, math.Float32bits(v))
		}
		return b
	}
	f64 := func(vs ...float64) (b []byte) {
		for _, v := range vs {
			b = le.AppendUint64(b, math.Float64bits(v))
		}
		return b
	}
	for _, tc := range []struct {
		name string
		w    wavFile
		want [][]float32
	}{
		{"8-bit mono, odd length (pad byte)", wavFile{tag: formatPCM, channels: 1, rate: 8000, bits: 8, align: -1, payload: []byte{0, 128, 255}},
			[][]float32{{-1, 0, 127.0 / 128}}},
		{"16-bit stereo", wavFile{tag: formatPCM, channels: 2, rate: 44100, bits: 16, align: -1, payload: pcm16(-32768, 16384, 32767, -1)},
			[][]float32{{-1, 32767.0 / 32768}, {0.5, -1.0 / 32768}}},
		{"24-bit mono", wavFile{tag: formatPCM, channels: 1, rate: 48000, bits: 24, align: -1, payload: []byte{0, 0, 0x80, 0xff, 0xff, 0x7f, 0, 0, 0x40}},
			[][]float32{{-1, float32(8388607.0 / 8388608), 0.5}}},
		{"32-bit mono", wavFile{tag: formatPCM, channels: 1, rate: 16000, bits: 32, align: -1, payload: le.AppendUint32(le.AppendUint32(nil, 0x80000000), 0x20000000)},
			[][]float32{{-1, 0.25}}},
		{"float32 stereo", wavFile{tag: formatFloat, channels: 2, rate: 22050, bits: 32, align: -1, payload: f32(0.125, -0.75, 1.5, 0)},
			[][]float32{{0.125, 1.5}, {-0.75, 0}}},
		{"float64 mono", wavFile{tag: formatFloat, channels: 1, rate: 16000, bits: 64, align: -1, payload: f64(-0.3, 0.6)},
			[][]float32{{-0.3, 0.6}}},
		{"extensible 16-bit, LIST chunk first", wavFile{tag: formatExtensible, sub: formatPCM, channels: 1, rate: 16000, bits: 16, align: -1, payload: pcm16(8192, -8192), junk: true},
			[][]float32{{0.25, -0.25}}},
		{"extensible float32", wavFile{tag: formatExtensible, sub: formatFloat, channels: 1, rate: 16000, bits: 32, align: -1, payload: f32(0.5)},
			[][]float32{{0.5}}},
		{"lowest accepted rate", wavFile{tag: formatPCM, channels: 1, rate: MinSampleRate, bits: 16, align: -1, payload: pcm16(16384)},
			[][]float32{{0.5}}},
		{"highest accepted rate", wavFile{tag: formatPCM, channels: 1, rate: MaxSampleRate, bits: 16, align: -1, payload: pcm16(-16384)},
			[][]float32{{-0.5}}},
		{"partial last frame dropped", wavFile{tag: formatPCM, channels: 2, rate: 16000, bits: 16, align: -1, payload: pcm16(100, 200, 300)},
			[][]float32{{100.0 / 32768}, {200.0 / 32768}}},
	} {
		clip, err := DecodeWAV(tc.w.bytes(), "x.wav")
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if clip.Rate != tc.w.rate || len(clip.Channels) != len(tc.want) {
			t.Errorf("%s: rate %d, %d channels, want %d, %d", tc.name, clip.Rate, len(clip.Channels), tc.w.rate, len(tc.want))
			continue
		}
		for c := range tc.want {
			if len(clip.Channels[c]) != len(tc.want[c]) {
				t.Errorf("%s: channel %d has %d samples, want %d", tc.name, c, len(clip.Channels[c]), len(tc.want[c]))
				continue
			}
			for i, v := range tc.want[c] {
				if clip.Channels[c][i] != v {
					t.Errorf("%s: channel %d sample %d = %v, want %v", tc.name, c, i, clip.Channels[c][i], v)
				}
			}
		}
	}
}

// brokenWAVs are the malformed files of TestDecodeWAVErrors, also the
// fuzz target's seeds.
func brokenWAVs() []struct {
	name string
	data []byte
	want string
} {
	ok := wavFile{tag: formatPCM, channels: 1, rate: 16000, bits: 16, align: -1, payload: pcm16(1, 2, 3, 4)}
	mod := func(f func(*wavFile)) []byte { w := ok; f(&w); return w.bytes() }
	full := ok.bytes()
	return []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "empty file: not a RIFF/WAVE file"},
		{"text", []byte("id,path\n1,a.wav\n"), "not a RIFF/WAVE file"},
		{"RIFF but AVI", append([]byte("RIFF\x04\x00\x00\x00AVI "), full[12:]...), "not a RIFF/WAVE file"},
		{"header only", full[:12], "truncated: no fmt chunk"},
		{"cut in the fmt chunk", full[:30], `truncated: chunk "fmt "`},
		{"cut before the data chunk", full[:36], "truncated: no data chunk"},
		{"cut in the data chunk", full[:len(full)-3], `truncated: chunk "data" at byte 36 declares 8 bytes, 5 present`},
		{"huge fmt size", append(append([]byte("RIFF\x00\x00\x00\x00WAVEfmt "), 0xfe, 0xff, 0xff, 0xff), full[20:]...), `declares 4294967294 bytes`},
		{"short fmt", append([]byte("RIFF\x00\x00\x00\x00WAVEfmt \x04\x00\x00\x00\x01\x00\x01\x00"), full[36:]...), "fmt chunk of 4 bytes"},
		{"data before fmt", mod(func(w *wavFile) { w.dataFirst = true }), "data chunk before the fmt chunk"},
		{"zero channels", mod(func(w *wavFile) { w.channels = 0; w.align = 2 }), "zero channels"},
		{"zero rate", mod(func(w *wavFile) { w.rate = 0 }), "zero sample rate"},
		{"1 Hz", mod(func(w *wavFile) { w.rate = 1 }), "sample rate 1 Hz is outside the accepted range 1000 Hz to 384000 Hz"},
		{"999 Hz", mod(func(w *wavFile) { w.rate = MinSampleRate - 1 }), "sample rate 999 Hz is outside the accepted range 1000 Hz to 384000 Hz"},
		{"384001 Hz", mod(func(w *wavFile) { w.rate = MaxSampleRate + 1 }), "sample rate 384001 Hz is outside the accepted range"},
		{"4 GHz", mod(func(w *wavFile) { w.rate = 4e9 }), "sample rate 4000000000 Hz is outside the accepted range 1000 Hz to 384000 Hz"},
		{"12-bit PCM", mod(func(w *wavFile) { w.bits = 12; w.align = 2 }), "12-bit PCM"},
		{"16-bit float", mod(func(w *wavFile) { w.tag = formatFloat }), "16-bit IEEE float"},
		{"mu-law", mod(func(w *wavFile) { w.tag = 7; w.bits = 8 }), "format tag 0x7"},
		{"extensible without SubFormat", append([]byte("RIFF\x00\x00\x00\x00WAVEfmt \x10\x00\x00\x00\xfe\xff\x01\x00\x80\x3e\x00\x00\x00\x7d\x00\x00\x02\x00\x10\x00"), full[36:]...), "has no SubFormat"},
		{"block align", mod(func(w *wavFile) { w.align = 4 }), "block align 4, want 1 channels x 2 bytes"},
		{"no samples", mod(func(w *wavFile) { w.payload = nil }), "no samples"},
		{"less than a frame", mod(func(w *wavFile) { w.channels = 2; w.align = -1; w.payload = pcm16(7) }), "no samples"},
		{"NaN float", mod(func(w *wavFile) {
			w.tag, w.bits = formatFloat, 32
			w.payload = binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, 0), 0x7fc00000)
		}), "frame 1 channel 0: non-finite sample"},
		{"float64 overflowing float32", mod(func(w *wavFile) {
			w.tag, w.bits = formatFloat, 64
			w.payload = binary.LittleEndian.AppendUint64(nil, math.Float64bits(1e300))
		}), "frame 0 channel 0: non-finite sample"},
	}
}

func TestDecodeWAVErrors(t *testing.T) {
	for _, tc := range brokenWAVs() {
		_, err := DecodeWAV(tc.data, "dir/utt.wav")
		if err == nil || !strings.Contains(err.Error(), "audio dir/utt.wav: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one naming dir/utt.wav with %q", tc.name, err, tc.want)
		}
	}
	if _, err := ReadWAV(filepath.Join(t.TempDir(), "missing.wav")); err == nil || !strings.Contains(err.Error(), "missing.wav") {
		t.Errorf("missing file: %v", err)
	}
}

// TestDecodeWAVMetadataNotParsed: a LIST chunk whose INFO entry declares
// 2 GiB in a 70-byte file is skipped, not handed to go-audio/wav (which
// allocated the 2 GiB before the fix).
func TestDecodeWAVMetadataNotParsed(t *testing.T) {
	list := []byte("LIST\x10\x00\x00\x00INFOISFT\x00\x00\x00\x80ab\x00\x00")
	ok := wavFile{tag: formatPCM, channels: 1, rate: 16000, bits: 16, align: -1, payload: pcm16(16384)}.bytes()
	data := append(append(append([]byte(nil), ok[:12]...), list...), ok[12:]...)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	clip, err := DecodeWAV(data, "list.wav")
	runtime.ReadMemStats(&after)
	if err != nil || clip.Len() != 1 || clip.Channels[0][0] != 0.5 {
		t.Fatalf("%v, %v", clip, err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
		t.Errorf("decoding a %d-byte file allocated %d bytes", len(data), grew)
	}
}

// TestLoadLibraryWritten reads a stereo 16-bit file written by go-audio's
// encoder (an independent writer) through Load: mono mixing and the
// 32 kHz -> 16 kHz resampling of a constant give the constant back.
func TestLoadLibraryWritten(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stereo.wav")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	const frames = 32000 // 1 s
	data := make([]int, 2*frames)
	for i := 0; i < frames; i++ {
		data[2*i], data[2*i+1] = 8192, -4096 // 0.25 and -0.125: mean 0.0625
	}
	enc := wav.NewEncoder(f, 32000, 16, 2, formatPCM)
	if err := enc.Write(&goaudio.IntBuffer{Data: data, Format: &goaudio.Format{NumChannels: 2, SampleRate: 32000}, SourceBitDepth: 16}); err != nil {
		t.Fatal(err)
	}
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	x, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(x) != 16000 {
		t.Fatalf("%d samples, want 16000", len(x))
	}
	// Away from the edges (where the zeros outside the clip enter the filter).
	for i := 200; i < len(x)-200; i++ {
		if math.Abs(float64(x[i])-0.0625) > 1e-5 {
			t.Fatalf("sample %d = %v, want 0.0625", i, x[i])
		}
	}
}

func TestMono(t *testing.T) {
	for _, tc := range []struct {
		ch   [][]float32
		want []float32
	}{
		{[][]float32{{1, -2, 0.5}}, []float32{1, -2, 0.5}},
		{[][]float32{{1, -2}, {0, 1}}, []float32{0.5, -0.5}},
		{[][]float32{{0.3, 1}, {0.6, 1}, {-0.3, -1}}, []float32{0.2, 1.0 / 3}},
	} {
		got := Clip{Channels: tc.ch, Rate: 16000}.Mono()
		for i := range tc.want {
			if math.Abs(float64(got[i]-tc.want[i])) > 1e-7 {
				t.Errorf("%d channels: sample %d = %v, want %v", len(tc.ch), i, got[i], tc.want[i])
			}
		}
	}
}

// FuzzDecodeWAV: DecodeWAV never panics, and a decoded clip is consistent
// (channels of equal, non-zero length, finite samples, a rate in
// MinSampleRate to MaxSampleRate).
func FuzzDecodeWAV(f *testing.F) {
	for _, tc := range brokenWAVs() {
		f.Add(tc.data)
	}
	f.Add(wavFile{tag: formatPCM, channels: 2, rate: 44100, bits: 24, align: -1, payload: make([]byte, 12), junk: true}.bytes())
	f.Add(wavFile{tag: formatExtensible, sub: formatFloat, channels: 1, rate: 16000, bits: 32, align: -1, payload: make([]byte, 8)}.bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		clip, err := DecodeWAV(data, "fuzz.wav")
		if err != nil {
			return
		}
		if clip.Rate < MinSampleRate || clip.Rate > MaxSampleRate || len(clip.Channels) == 0 || clip.Len() == 0 {
			t.Fatalf("rate %d, %d channels of %d samples", clip.Rate, len(clip.Channels), clip.Len())
		}
		for c, ch := range clip.Channels {
			if len(ch) != clip.Len() {
				t.Fatalf("channel %d has %d samples, channel 0 %d", c, len(ch), clip.Len())
			}
			for i, v := range ch {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					t.Fatalf("channel %d sample %d = %v", c, i, v)
				}
			}
		}
	})
}
