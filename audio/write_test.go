package audio

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWriteWAVRoundTrip writes 16-bit PCM and reads it back: every sample
// within half a quantisation step, full scale clipped, the rate kept.
func TestWriteWAVRoundTrip(t *testing.T) {
	x := []float32{0, 0.5, -0.5, 1.0 / 32768, -1, 0.99997, 1.5, -2, 0.123456}
	want := []float32{0, 0.5, -0.5, 1.0 / 32768, -1, 32767.0 / 32768, 32767.0 / 32768, -1, float32(math.Round(0.123456*32768) / 32768)}
	path := filepath.Join(t.TempDir(), "x.wav")
	if err := WriteWAV(path, x, 16000); err != nil {
		t.Fatal(err)
	}
	c, err := ReadWAV(path)
	if err != nil {
		t.Fatal(err)
	}
	if c.Rate != 16000 || len(c.Channels) != 1 || c.Len() != len(x) {
		t.Fatalf("read rate %d, %d channels, %d samples", c.Rate, len(c.Channels), c.Len())
	}
	for i, v := range c.Channels[0] {
		if v != want[i] {
			t.Errorf("sample %d: %v, want %v", i, v, want[i])
		}
	}
	if st, _ := os.Stat(path); st.Size() != 44+2*int64(len(x)) {
		t.Errorf("file of %d bytes, want a 44-byte header and %d bytes of samples", st.Size(), 2*len(x))
	}
}

func TestWriteWAVErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		x    []float32
		rate int
		want string
	}{
		{"zero rate", []float32{0}, 0, "sample rate 0 Hz"},
		{"1 Hz", []float32{0}, 1, "sample rate 1 Hz is outside the accepted range 1000 Hz to 384000 Hz"},
		{"4 GHz", []float32{0}, 4e9, "sample rate 4000000000 Hz is outside the accepted range"}, // panicked in go-audio/wav
		{"empty", nil, 16000, "empty waveform"},
		{"NaN", []float32{0, float32(math.NaN())}, 16000, "sample 1 is NaN"},
		{"Inf", []float32{float32(math.Inf(-1))}, 16000, "sample 0 is -Inf"},
	} {
		path := filepath.Join(dir, tc.name+".wav")
		err := WriteWAV(path, tc.x, tc.rate)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: %v, want an error naming the file with %q", tc.name, err, tc.want)
		}
		if _, err := os.Stat(path); err == nil {
			t.Errorf("%s: a file was written", tc.name)
		}
	}
}
