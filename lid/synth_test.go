package lid

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/audio"
	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/progress"
)

// fakeRenderer writes 0.2 s of a tone at 22050 Hz whose frequency depends on
// the text, voice, speed and pitch (so the corpus goes through resampling),
// and refuses words holding an "x" (WordChecker).
type fakeRenderer struct {
	silent bool
	fail   error
	calls  int
}

func (f *fakeRenderer) Render(text string, v Voice, speed, pitch int, path string) error {
	f.calls++
	if f.fail != nil {
		return f.fail
	}
	h := fnv.New32a()
	fmt.Fprint(h, text, v.Arg(), speed, pitch)
	freq := 200 + float64(h.Sum32()%800)
	x := make([]float32, 4410)
	if !f.silent {
		for i := range x {
			x[i] = float32(0.5 * math.Sin(2*math.Pi*freq*float64(i)/22050))
		}
	}
	return audio.WriteWAV(path, x, 22050)
}

func (f *fakeRenderer) ReadsWord(word, voice string) (bool, error) {
	return !strings.Contains(word, "x"), nil
}

// fakeWords returns n words per source: w000a... with every fifth holding
// an "x" (refused by fakeRenderer).
func fakeWords(n int) func(WordSource) ([]string, error) {
	return func(s WordSource) ([]string, error) {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("%s%c%c", s.Kind[:2], 'a'+rune(i/26), 'a'+rune(i%26))
			if i%5 == 0 {
				out[i] += "x"
			}
		}
		return out, nil
	}
}

func smallOptions() SynthOptions {
	o := DefaultSynthOptions()
	o.Train, o.Dev, o.Test = 6, 3, 2
	o.MinWords, o.MaxWords = 2, 4
	o.Languages = []string{"Welsh", "English"}
	return o
}

// hashTree hashes every file under root by relative path.
func hashTree(t *testing.T, root string) map[string][32]byte {
	t.Helper()
	out := map[string][32]byte{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		out[rel] = sha256.Sum256(data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestSynthesize(t *testing.T) {
	root := filepath.Join(t.TempDir(), "corpus")
	o := smallOptions()
	r := &fakeRenderer{}
	var events int
	info, err := Synthesize(root, o, r, "fake", fakeWords(60), func(e progress.Event) { events++ })
	if err != nil {
		t.Fatal(err)
	}
	if r.calls != 2*11 || events != 2*11 {
		t.Errorf("%d renders, %d progress events, want 22", r.calls, events)
	}
	sentences := map[string]string{} // sentence -> split
	voices := map[string]string{}    // client id -> split
	for _, split := range splitNames() {
		utts, err := Load(root, split)
		if err != nil {
			t.Fatal(err)
		}
		if want := 2 * o.perSplit(split); len(utts) != want {
			t.Fatalf("%s: %d utterances, want %d", split, len(utts), want)
		}
		if p := Present(utts); !reflect.DeepEqual(p, []int{11, 44}) {
			t.Errorf("%s: labels %v, want [11 44] (English, Welsh)", split, p)
		}
		for _, u := range utts {
			lang := Languages()[u.Language]
			key := lang + "|" + u.Sentence
			if s, ok := sentences[key]; ok {
				t.Errorf("%s sentence %q in %s and %s", lang, u.Sentence, s, split)
			}
			sentences[key] = split
			if s, ok := voices[u.ClientID]; ok && s != split {
				t.Errorf("voice %s in %s and %s", u.ClientID, s, split)
			}
			voices[u.ClientID] = split
			if n := len(strings.Fields(u.Sentence)); n < 2 || n > 4 || strings.Contains(u.Sentence, "x") {
				t.Errorf("sentence %q: %d words or a refused word", u.Sentence, n)
			}
			if !strings.HasPrefix(u.ClientID, "espeak-"+map[int]string{11: "en-us", 44: "cy"}[u.Language]+"-") {
				t.Errorf("%s: client id %s is not the language's voice", lang, u.ClientID)
			}
			if (u.Gender == "female") != strings.HasSuffix(u.ClientID[:len(u.ClientID)-1], "-f") {
				t.Errorf("client %s gender %s", u.ClientID, u.Gender)
			}
			c, err := audio.ReadWAV(u.Path)
			if err != nil {
				t.Fatal(err)
			}
			// 4410 samples at 22050 Hz: ceil(4410 * 16000 / 22050) = 3200.
			if c.Rate != 16000 || len(c.Channels) != 1 || c.Len() != 3200 {
				t.Errorf("%s: %d Hz, %d channels, %d samples; want 16 kHz mono, 3200", u.Path, c.Rate, len(c.Channels), c.Len())
			}
		}
	}
	// Train alternates male and female voices.
	train, _ := Load(root, "train")
	if train[0].Gender == train[1].Gender {
		t.Errorf("first two train utterances both %s", train[0].Gender)
	}
	got, err := ReadSynthInfo(root)
	if err != nil || got == nil {
		t.Fatalf("ReadSynthInfo: %v, %v", got, err)
	}
	if got.Note != StandInNote || !strings.Contains(StandInNote, "NOT CommonLanguage") || got.Renderer != "fake" {
		t.Errorf("metadata note %q renderer %q", got.Note, got.Renderer)
	}
	if len(got.Languages) != 2 || len(got.Missing) != 43 || !reflect.DeepEqual(got, info) {
		t.Errorf("metadata: %d languages, %d missing; equal to the returned info: %v", len(got.Languages), len(got.Missing), reflect.DeepEqual(got, info))
	}
	for _, l := range got.Languages {
		if l.RejectedWords == 0 || l.NumWords != 60 {
			t.Errorf("%s: %d words, %d rejected; want 60 and some", l.Name, l.NumWords, l.RejectedWords)
		}
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil || !strings.Contains(string(readme), "(NOT CommonLanguage)") || !strings.Contains(string(readme), "| 44 | Welsh | cy |") {
		t.Errorf("README: %v\n%s", err, readme)
	}
	if m, _ := filepath.Glob(filepath.Join(root, ".render-*")); len(m) != 0 {
		t.Errorf("scratch left behind: %v", m)
	}
	if info, err := ReadSynthInfo(t.TempDir()); info != nil || err != nil {
		t.Errorf("ReadSynthInfo of a folder without metadata: %v, %v", info, err)
	}
}

// TestSynthesizeDeterministic: the same seed gives the same bytes; a
// language's utterances do not depend on the others rendered; another seed
// gives other sentences.
func TestSynthesizeDeterministic(t *testing.T) {
	dir := t.TempDir()
	run := func(name string, o SynthOptions) map[string][32]byte {
		root := filepath.Join(dir, name)
		if _, err := Synthesize(root, o, &fakeRenderer{}, "fake", fakeWords(60), nil); err != nil {
			t.Fatal(err)
		}
		return hashTree(t, root)
	}
	o := smallOptions()
	a, b := run("a", o), run("b", o)
	if !reflect.DeepEqual(a, b) {
		t.Error("two runs with one seed differ")
	}
	o.Languages = []string{"English"}
	alone := run("alone", o)
	for p, h := range alone {
		if strings.HasPrefix(p, "English") && a[p] != h {
			t.Errorf("%s differs when English is rendered alone", p)
		}
	}
	o.Seed = 2
	other := run("other", o)
	if other["English/train.csv"] == alone["English/train.csv"] {
		t.Error("seed 2 gives seed 1's English train split")
	}
}

func TestSynthesizeErrors(t *testing.T) {
	base := smallOptions()
	for _, tc := range []struct {
		name   string
		edit   func(o *SynthOptions)
		r      *fakeRenderer
		words  func(WordSource) ([]string, error)
		prep   func(root string)
		want   string
		option string
	}{
		{name: "negative dev", edit: func(o *SynthOptions) { o.Dev = -1 }, option: "dev"},
		{name: "nothing", edit: func(o *SynthOptions) { o.Train, o.Dev, o.Test = 0, 0, 0 }, option: "train"},
		{name: "zero words", edit: func(o *SynthOptions) { o.MinWords = 0 }, option: "min_words"},
		{name: "max < min words", edit: func(o *SynthOptions) { o.MaxWords = 1 }, option: "max_words"},
		{name: "speed", edit: func(o *SynthOptions) { o.MinSpeed = 79 }, option: "min_speed"},
		{name: "max speed", edit: func(o *SynthOptions) { o.MaxSpeed = 451 }, option: "max_speed"},
		{name: "pitch", edit: func(o *SynthOptions) { o.MinPitch = -1 }, option: "min_pitch"},
		{name: "max pitch", edit: func(o *SynthOptions) { o.MaxPitch = 100 }, option: "max_pitch"},
		{name: "empty languages", edit: func(o *SynthOptions) { o.Languages = []string{} }, option: "languages"},
		{name: "unknown language", edit: func(o *SynthOptions) { o.Languages = []string{"Klingon"} }, option: "languages"},
		{name: "no voice", edit: func(o *SynthOptions) { o.Languages = []string{"Breton"} }, option: "languages", want: "no Breton voice"},
		{name: "twice", edit: func(o *SynthOptions) { o.Languages = []string{"Welsh", "Welsh"} }, option: "languages", want: "twice"},
		{name: "not empty", prep: func(root string) { os.MkdirAll(root, 0o755); os.WriteFile(filepath.Join(root, "x"), nil, 0o644) },
			want: "the folder is not empty"},
		{name: "word list", words: func(WordSource) ([]string, error) { return nil, errors.New("no such file") },
			want: "Welsh (Debian package aspell-cy): no such file"},
		{name: "small word list", words: fakeWords(49), want: "Welsh: 49 distinct words in cy, want >= 50"},
		{name: "too few sentences", edit: func(o *SynthOptions) { o.MinWords, o.MaxWords, o.Train = 1, 1, 60 },
			want: "no new sentence in 1000 draws from 60 words"},
		{name: "render fails", r: &fakeRenderer{fail: errors.New("boom")}, want: "English train English_train_00000.wav: boom"},
		{name: "silence", r: &fakeRenderer{silent: true}, want: "the renderer returned silence"},
	} {
		o := base
		if tc.edit != nil {
			tc.edit(&o)
		}
		r := tc.r
		if r == nil {
			r = &fakeRenderer{}
		}
		words := tc.words
		if words == nil {
			words = fakeWords(60)
		}
		root := filepath.Join(t.TempDir(), "corpus")
		if tc.prep != nil {
			tc.prep(root)
		}
		_, err := Synthesize(root, o, r, "fake", words, nil)
		if err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		var oe *option.Error
		if tc.option != "" && (!errors.As(err, &oe) || oe.Option != tc.option) {
			t.Errorf("%s: %v, want an *option.Error about %s", tc.name, err, tc.option)
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
		if tc.prep == nil && !strings.Contains(tc.name, "render") && tc.name != "silence" {
			if _, err := os.Stat(root); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s: %s was created before the error", tc.name, root)
			}
		}
	}
}

func TestSplitVoices(t *testing.T) {
	for seed := uint64(0); seed < 20; seed++ {
		v := splitVoices("de", rand.New(rand.NewPCG(seed, 0)))
		all := map[string]string{}
		for split, vs := range v {
			males := 0
			for _, x := range vs {
				if s, ok := all[x.Variant]; ok {
					t.Fatalf("seed %d: %s in %s and %s", seed, x.Variant, s, split)
				}
				all[x.Variant] = split
				if x.Gender() == "male" {
					males++
				}
			}
			want := map[string]int{"train": 5, "dev": 1, "test": 1}[split]
			if males != want {
				t.Errorf("seed %d %s: %d male voices, want %d", seed, split, males, want)
			}
		}
		var got []string
		for k := range all {
			got = append(got, k)
		}
		sort.Strings(got)
		want := append(append([]string(nil), femaleVariants...), maleVariants...)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("seed %d: voices %v, want every variant once", seed, got)
		}
	}
}

func TestStandInTable(t *testing.T) {
	if n := len(standInLanguages()); n != 34 || len(notRendered) != 45-34 {
		t.Errorf("%d stand-in languages, %d not rendered; want 34 and 11", n, len(notRendered))
	}
	for _, l := range Languages() {
		_, src, why, ok := standInVoice(l)
		if ok == (why != "") || (ok && (src.Package == "" || len(src.Paths) == 0)) {
			t.Errorf("%s: ok %v, why %q, source %+v", l, ok, why, src)
		}
	}
	for l := range standIns {
		if _, ok := LanguageIndex(l); !ok {
			t.Errorf("stand-in %q is not a CommonLanguage language", l)
		}
	}
}
