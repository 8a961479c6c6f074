package audio

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeTone writes a 16-bit PCM file of channels x frames at rate: a
// 440 Hz tone on the first channel, 1 kHz on the others, with a little
// of the frame index in the low bits so that no two windows look alike.
func writeTone(t testing.TB, path string, rate, channels, frames int) {
	t.Helper()
	payload := make([]byte, 0, 2*channels*frames)
	for i := range frames {
		for c := range channels {
			f := 440.0
			if c > 0 {
				f = 1000
			}
			v := 0.4*math.Sin(2*math.Pi*f*float64(i)/float64(rate)) + 0.001*float64(i%97)/97
			payload = append(payload, pcm16(int16(math.Round(v*32767)))...)
		}
	}
	data := wavFile{tag: formatPCM, channels: channels, rate: rate, bits: 16, align: -1, payload: payload}.bytes()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestLoadCroppedMatchesLoad: LoadCropped(path, T) is Load(path)[:T] bit
// for bit, for clips shorter and longer than T, mono and stereo, at the
// rates of the resampler's paths (copy, tabulated up- and downsampling,
// the untabulated filter of 16,001 Hz, both ends of the accepted range),
// and full is len(Load(path)).
func TestLoadCroppedMatchesLoad(t *testing.T) {
	dir := t.TempDir()
	const T = 4000 // 0.25 s at 16 kHz
	for _, rate := range []int{MinSampleRate, 8000, SampleRate, 16001, 22050, 44100, 48000, MaxSampleRate} {
		for _, channels := range []int{1, 2} {
			for _, seconds := range []float64{0.1, 0.25, 0.6} {
				name := fmt.Sprintf("%d Hz, %d channels, %g s", rate, channels, seconds)
				path := filepath.Join(dir, fmt.Sprintf("%d-%d-%g.wav", rate, channels, seconds))
				writeTone(t, path, rate, channels, int(seconds*float64(rate)))
				want, err := Load(path)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				got, full, err := LoadCropped(context.Background(), path, T)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if full != len(want) {
					t.Errorf("%s: full %d, want len(Load) %d", name, full, len(want))
				}
				if len(got) != min(T, len(want)) {
					t.Errorf("%s: %d samples, want %d", name, len(got), min(T, len(want)))
					continue
				}
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Errorf("%s: sample %d = %v, Load's %v", name, i, got[i], want[i])
						break
					}
				}
			}
		}
	}
}

// TestLoadCroppedLong48k: a 48 kHz clip of 30 s cropped to 0.5 s gives
// exactly 8,000 samples, equal to those of the same clip cut at 1 s (the
// rest of the file is never decoded or resampled: only 0.5 s of input and
// the filter's 203 frames beyond), in a time that does not grow with the
// file: 24,201 input frames resampled instead of 1,440,000.
func TestLoadCroppedLong48k(t *testing.T) {
	dir := t.TempDir()
	const rate, seconds = 48000, 0.5
	T := int(seconds * SampleRate)
	need := resampleInput(T, rate, SampleRate)
	if max := int(seconds*rate) + filterHalf(rate, SampleRate) + 1; need > max || need < int(seconds*rate) {
		t.Fatalf("resampleInput %d frames, want between %d and %d", need, int(seconds*rate), max)
	}
	long, short := filepath.Join(dir, "long.wav"), filepath.Join(dir, "short.wav")
	writeTone(t, long, rate, 1, 30*rate)
	writeTone(t, short, rate, 1, rate)
	start := time.Now()
	x, full, err := LoadCropped(context.Background(), long, T)
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if len(x) != T || full != 30*SampleRate {
		t.Fatalf("%d samples of %d, want %d of %d", len(x), full, T, 30*SampleRate)
	}
	y, _, err := LoadCropped(context.Background(), short, T)
	if err != nil {
		t.Fatal(err)
	}
	for i := range x {
		if math.Float32bits(x[i]) != math.Float32bits(y[i]) {
			t.Fatalf("sample %d: %v from the 30 s file, %v from the 1 s file", i, x[i], y[i])
		}
	}
	data, err := os.ReadFile(long)
	if err != nil {
		t.Fatal(err)
	}
	clip, frames, err := decodeWAV(data, long, func(r int) int { return resampleInput(T, r, SampleRate) })
	if err != nil || clip.Len() != need || frames != 30*rate {
		t.Fatalf("decoded %d of %d frames (%v), want %d of %d", clip.Len(), frames, err, need, 30*rate)
	}
	start = time.Now()
	if _, err := Load(long); err != nil {
		t.Fatal(err)
	}
	t.Logf("0.5 s of a 30 s 48 kHz file: %v cropped before resampling, %v resampled whole (Load)", took, time.Since(start))
}

// TestLoadCroppedBadRate: files claiming 1 Hz or 4 GHz (the samples of a
// 16 kHz clip under a corrupt header) are refused before any resampling,
// naming the file, the rate and the accepted range. Before the fix the
// 1 Hz file resampled for minutes (10 minutes for 0.3 s of samples) and
// the 4 GHz file became one sample.
func TestLoadCroppedBadRate(t *testing.T) {
	dir := t.TempDir()
	for _, rate := range []int{1, 4e9} {
		path := filepath.Join(dir, fmt.Sprintf("claims-%d.wav", rate))
		writeTone(t, path, 16000, 1, 4800)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 4 { // the fmt chunk's rate field, at byte 24
			data[24+i] = byte(uint32(rate) >> (8 * i))
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		for _, load := range []func() error{
			func() error { _, _, err := LoadCropped(context.Background(), path, 32000); return err },
			func() error { _, err := Load(path); return err },
		} {
			err := load()
			want := fmt.Sprintf("audio %s: sample rate %d Hz is outside the accepted range 1000 Hz to 384000 Hz", path, rate)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%d Hz: error %v, want %q", rate, err, want)
			}
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("%d Hz: refused after %v", rate, took)
		}
	}
}

// TestLoadCroppedCancel: a done context stops loading before the file is
// read, and a context cancelled 100 ms into loading 60 s at 16,001 Hz
// (the untabulated filter: 25 s of resampling on the shared 2-core machine)
// stops it promptly; the error wraps context.Canceled and names the file.
// TestResampleStopsInside checks where the resampling loop stops.
func TestLoadCroppedCancel(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "long.wav")
	writeTone(t, path, 16001, 1, 60*16001)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := LoadCropped(ctx, path, NoCrop); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), path) {
		t.Errorf("cancelled before: %v, want context.Canceled naming %s", err, path)
	}
	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	_, _, err := LoadCropped(ctx, path, NoCrop)
	took := time.Since(start)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), path) {
		t.Fatalf("cancelled while resampling: %v, want context.Canceled naming %s", err, path)
	}
	if took > 3*time.Second {
		t.Errorf("returned %v after the start, cancelled at 100 ms", took)
	}
	t.Logf("cancelled at 100 ms, returned at %v: %v", took, err)
}

func TestLoadCroppedArgs(t *testing.T) {
	if _, _, err := LoadCropped(context.Background(), "x.wav", 0); err == nil || !strings.Contains(err.Error(), "max samples 0") {
		t.Errorf("0 samples: %v", err)
	}
	for _, tc := range []struct{ n, from, to, want int }{
		{0, 48000, 16000, 0}, {1, 48000, 16000, 204}, {8000, 48000, 16000, 23997 + 204}, {5, 16000, 16000, 5},
		{1, 8000, 16000, 69}, {math.MaxInt, 48000, 16000, math.MaxInt},
	} {
		if got := resampleInput(tc.n, tc.from, tc.to); got != tc.want {
			t.Errorf("resampleInput(%d, %d, %d) = %d, want %d", tc.n, tc.from, tc.to, got, tc.want)
		}
	}
}

// doneAfter is a context whose Err is nil for its first n calls and
// context.Canceled after: where a loop checks it, deterministically.
type doneAfter struct {
	context.Context
	n int
}

func (c *doneAfter) Err() error {
	if c.n--; c.n < 0 {
		return context.Canceled
	}
	return nil
}

// TestResampleStopsInside: resample checks its context inside the loop
// over output samples (every cancelTaps filter taps), not only before it:
// cancelled at its third check, it stops at output sample 2 x checkEvery,
// tabulated (48 kHz) or not (16,001 Hz).
func TestResampleStopsInside(t *testing.T) {
	for _, from := range []int{48000, 16001} {
		x := sine(from, 10, 440, 0.5, 0)
		every := max(1, cancelTaps/(2*filterHalf(from, SampleRate)+1))
		_, err := resample(&doneAfter{Context: context.Background(), n: 2}, x, from, SampleRate, NoCrop)
		want := fmt.Sprintf("stopped at output sample %d of 160000", 2*every)
		if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), want) {
			t.Errorf("%d Hz: %v, want context.Canceled %q", from, err, want)
		}
	}
}
