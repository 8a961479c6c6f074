package speech

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nvdp-project/nvdp/audio"
	"github.com/nvdp-project/nvdp/internal/lidtest"
	"github.com/nvdp-project/nvdp/lid"
	"github.com/nvdp-project/nvdp/nvib"
)

// toneCorpus writes lidtest's tone corpus (train 4, dev 2 per language)
// and returns its root and the path of Basque's first train utterance.
func toneCorpus(t *testing.T) (root, first string) {
	t.Helper()
	root = t.TempDir()
	lidtest.WriteToneCorpus(t, root, map[string]int{"train": 4, "dev": 2})
	return root, lid.AudioPath(root, lidtest.Languages[0], "train", lid.Row{ClientID: "voice0", Path: "u0.wav"})
}

// writeSine replaces path with seconds of a 300 Hz sine at rate.
func writeSine(t *testing.T, path string, rate int, seconds float64) {
	t.Helper()
	x := make([]float32, int(seconds*float64(rate)))
	for i := range x {
		x[i] = float32(0.4 * math.Sin(2*math.Pi*300*float64(i)/float64(rate)))
	}
	if err := audio.WriteWAV(path, x, rate); err != nil {
		t.Fatal(err)
	}
}

// TestLoadSplitBadRate: an utterance whose header claims 1 Hz or 4 GHz
// (its samples those of a 0.3 s clip at 16 kHz) fails the split's loading
// at once, naming the file, the rate and the accepted range. Before the
// fix, 1 Hz resampled for about 10 minutes (ignoring SIGTERM in nvdp
// train) and 4 GHz silently became one sample.
func TestLoadSplitBadRate(t *testing.T) {
	root, first := toneCorpus(t)
	good, err := os.ReadFile(first)
	if err != nil {
		t.Fatal(err)
	}
	for _, rate := range []uint32{1, 4e9} {
		bad := append([]byte(nil), good...)
		binary.LittleEndian.PutUint32(bad[24:], rate) // the fmt chunk's sample rate
		if err := os.WriteFile(first, bad, 0o644); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err := LoadSplit(context.Background(), root, "train", 0, 8000)
		took := time.Since(start)
		want := fmt.Sprintf("audio %s: sample rate %d Hz is outside the accepted range 1000 Hz to 384000 Hz", first, rate)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%d Hz: %v, want %q", rate, err, want)
		}
		if took > 5*time.Second {
			t.Errorf("%d Hz: refused after %v", rate, took)
		}
		t.Logf("%d Hz: refused in %v", rate, took)
	}
}

// TestLoadSplitCropsBeforeResampling: a 48 kHz utterance of 20 s in a
// split loaded at 0.5 s (T = 8,000) is cropped before it is resampled:
// its row holds exactly T samples, bit for bit the normalised first T of
// the whole clip resampled (audio.Load, the loading before the fix), and
// counts in Cropped; the other utterances (16 kHz, 0.3 to 0.6 s) are
// unchanged: their first T samples, zero-padded, normalised.
func TestLoadSplitCropsBeforeResampling(t *testing.T) {
	root, first := toneCorpus(t)
	writeSine(t, first, 48000, 20)
	const T = 8000
	d, err := LoadSplit(context.Background(), root, "train", 0, T)
	if err != nil {
		t.Fatal(err)
	}
	cropped := 0
	for i, u := range d.Utterances {
		w, err := audio.Load(u.Path) // whole, resampled: the loading before the fix
		if err != nil {
			t.Fatal(err)
		}
		if len(w) > T {
			cropped++
		}
		want := make([]float32, T)
		copy(want, w[:min(len(w), T)])
		if err := audio.Normalize(want[:min(len(w), T)]); err != nil {
			t.Fatal(err)
		}
		for k, v := range d.Waves[i*T : (i+1)*T] {
			if math.Float32bits(v) != math.Float32bits(want[k]) {
				t.Fatalf("%s: sample %d = %v, want %v", u.Path, k, v, want[k])
			}
		}
	}
	if d.Cropped != cropped || cropped < 2 {
		t.Errorf("Cropped %d, want %d (the 48 kHz clip and the tones over 0.5 s)", d.Cropped, cropped)
	}
}

// TestLoadSplitCancelled: a cancelled context stops LoadSplit: before any
// file, and 100 ms into a split holding an utterance whose resampling
// takes seconds (30 s at 16,001 Hz, loaded whole at T = 30 s: the
// untabulated filter); the error wraps context.Canceled and names the
// split.
func TestLoadSplitCancelled(t *testing.T) {
	root, first := toneCorpus(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := LoadSplit(ctx, root, "train", 0, 8000); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "loading the train split of "+root) {
		t.Errorf("cancelled before: %v, want context.Canceled naming the split", err)
	}
	writeSine(t, first, 16001, 30)
	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	_, err := LoadSplit(ctx, root, "train", 0, 30*16000)
	took := time.Since(start)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled while loading: %v, want context.Canceled", err)
	}
	if took > 3*time.Second {
		t.Errorf("returned %v after the start, cancelled at 100 ms", took)
	}
	t.Logf("cancelled at 100 ms, returned at %v: %v", took, err)
}

// TestRunCancelledWhileLoading: Run (what `nvdp train --task lid` calls
// with its signal context) hands its context to the loading: cancelled
// 100 ms into loading a split whose resampling takes seconds, it returns
// the loading's context.Canceled before any training.
func TestRunCancelledWhileLoading(t *testing.T) {
	root, first := toneCorpus(t)
	writeSine(t, first, 16001, 30)
	o := DefaultOptions()
	o.DataDir, o.MaxSeconds = root, 30
	o.Train.Variant, o.Train.Epochs, o.Train.BatchSize, o.Train.Out = nvib.ModelNVDPClipped, 1, 4, filepath.Join(t.TempDir(), "run")
	o.Train.HandSetClipping = true
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	_, err := Run(ctx, o, nil)
	took := time.Since(start)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "loading the train split") {
		t.Fatalf("%v, want the train split's loading cancelled", err)
	}
	if took > 3*time.Second {
		t.Errorf("returned %v after the start, cancelled at 100 ms", took)
	}
}
