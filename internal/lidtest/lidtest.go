// Package lidtest writes small corpora in CommonLanguage's layout for the
// tests of the speech task (package speech, cmd/nvdp): no espeak-ng needed.
package lidtest

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/nvdp-project/nvdp/audio"
	"github.com/nvdp-project/nvdp/lid"
)

// Languages are the languages of a tone corpus, in lid.Load's order.
var Languages = []string{"Basque", "Dutch", "Welsh"}

// WriteToneCorpus writes, under root, for each of Languages and each split
// of n, n[split] utterances of 0.3 to 0.6 s of a sine tone at the
// language's frequency (200, 400, 600 Hz, each utterance detuned by up to
// 6%) with a tenth of its third harmonic, 16 kHz, two "voices" per split:
// a corpus a model learns to tell apart in a few steps.
func WriteToneCorpus(t testing.TB, root string, n map[string]int) {
	t.Helper()
	for li, lang := range Languages {
		for split, count := range n {
			var rows []lid.Row
			for i := range count {
				r := lid.Row{ClientID: fmt.Sprintf("voice%d", i%2), Path: fmt.Sprintf("u%d.wav", i), Sentence: "tone"}
				x := make([]float32, int((0.3+0.1*float64(i%4))*16000))
				f0 := 200 * float64(li+1) * (1 + 0.03*float64(i%3))
				for k := range x {
					s := float64(k) / 16000
					x[k] = float32(0.5*math.Sin(2*math.Pi*f0*s) + 0.1*math.Sin(2*math.Pi*3*f0*s+float64(i)))
				}
				p := lid.AudioPath(root, lang, split, r)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := audio.WriteWAV(p, x, 16000); err != nil {
					t.Fatal(err)
				}
				rows = append(rows, r)
			}
			b, err := lid.EncodeCSV(rows)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(lid.CSVPath(root, lang, split), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}
