package lid

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/nvdp-project/nvdp/audio"
	"github.com/nvdp-project/nvdp/internal/atomicfile"
	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/progress"
)

// StandInNote is what the synthetic corpus says of itself in its metadata
// and README: it is never CommonLanguage.
const StandInNote = "Synthetic stand-in for CommonLanguage rendered by espeak-ng from Debian word lists. " +
	"It is NOT CommonLanguage: no recording, no speaker and no sentence comes from it; " +
	"only the layout and the language labels are CommonLanguage's."

// synthMetadataFile is the metadata file at the root of a synthetic corpus,
// a [SynthInfo] as JSON; CommonLanguage's release has none.
const synthMetadataFile = "SYNTHETIC.json"

// SynthOptions sizes and seeds a synthetic corpus.
type SynthOptions struct {
	Seed uint64 `json:"seed"`
	// Utterances per language in each split (>= 0; at least one overall).
	Train int `json:"train"`
	Dev   int `json:"dev"`
	Test  int `json:"test"`
	// Words per sentence, drawn uniformly in [MinWords, MaxWords], 1 <= MinWords.
	MinWords int `json:"min_words"`
	MaxWords int `json:"max_words"`
	// espeak-ng speed (-s, words per minute, 80 to 450) and pitch (-p, 0 to
	// 99), drawn uniformly per utterance in [Min, Max].
	MinSpeed int `json:"min_speed"`
	MaxSpeed int `json:"max_speed"`
	MinPitch int `json:"min_pitch"`
	MaxPitch int `json:"max_pitch"`
	// Languages are the CommonLanguage names to render; nil renders every
	// language with a stand-in voice.
	Languages []string `json:"languages,omitempty"`
}

// DefaultSynthOptions returns the defaults: seed 1, 200/50/50 utterances per
// language, 3 to 8 words, speed 130 to 210 words per minute and pitch 30 to
// 70. espeak-ng's defaults are speed 175 and pitch 50.
func DefaultSynthOptions() SynthOptions {
	return SynthOptions{Seed: 1, Train: 200, Dev: 50, Test: 50, MinWords: 3, MaxWords: 8,
		MinSpeed: 130, MaxSpeed: 210, MinPitch: 30, MaxPitch: 70}
}

// Validate checks the options; an invalid one is an *option.Error naming
// its JSON key.
func (o SynthOptions) Validate() error {
	for _, c := range []struct {
		key   string
		value any
		ok    bool
		why   string
	}{
		{"train", o.Train, o.Train >= 0, "must be >= 0"},
		{"dev", o.Dev, o.Dev >= 0, "must be >= 0"},
		{"test", o.Test, o.Test >= 0, "must be >= 0"},
		{"train", o.Train, o.Train+o.Dev+o.Test > 0, "train + dev + test must be >= 1"},
		{"min_words", o.MinWords, o.MinWords >= 1, "must be >= 1"},
		{"max_words", o.MaxWords, o.MaxWords >= o.MinWords, "must be >= min_words"},
		{"min_speed", o.MinSpeed, o.MinSpeed >= 80 && o.MinSpeed <= 450, "must be in [80, 450] (espeak-ng -s)"},
		{"max_speed", o.MaxSpeed, o.MaxSpeed >= o.MinSpeed && o.MaxSpeed <= 450, "must be in [min_speed, 450]"},
		{"min_pitch", o.MinPitch, o.MinPitch >= 0 && o.MinPitch <= 99, "must be in [0, 99] (espeak-ng -p)"},
		{"max_pitch", o.MaxPitch, o.MaxPitch >= o.MinPitch && o.MaxPitch <= 99, "must be in [min_pitch, 99]"},
	} {
		if !c.ok {
			return &option.Error{Option: c.key, Value: c.value, Reason: c.why}
		}
	}
	if o.Languages != nil && len(o.Languages) == 0 {
		return &option.Error{Option: "languages", Reason: "empty (nil renders every stand-in language)"}
	}
	seen := map[string]bool{}
	for _, l := range o.Languages {
		if _, _, why, ok := standInVoice(l); !ok {
			return &option.Error{Option: "languages", Value: l, Reason: why}
		}
		if seen[l] {
			return &option.Error{Option: "languages", Value: l, Reason: "given twice"}
		}
		seen[l] = true
	}
	return nil
}

func (o SynthOptions) perSplit(split string) int {
	switch split {
	case "train":
		return o.Train
	case "dev":
		return o.Dev
	}
	return o.Test
}

// Voice is an espeak-ng voice: a language voice with a variant. "en-us",
// "m3" speaks as `espeak-ng -v en-us+m3`.
type Voice struct {
	Language string `json:"language"`
	Variant  string `json:"variant"`
}

// Arg is the -v argument of espeak-ng.
func (v Voice) Arg() string { return v.Language + "+" + v.Variant }

// ClientID is the voice's speaker id in the corpus, its client_id column.
func (v Voice) ClientID() string { return "espeak-" + v.Language + "-" + v.Variant }

// Gender is the gender column: male for the m variants, female for f.
func (v Voice) Gender() string {
	if strings.HasPrefix(v.Variant, "f") {
		return "female"
	}
	return "male"
}

// Renderer speaks text into a WAV file of any rate and channel count: the
// corpus converts it through package audio.
type Renderer interface {
	Render(text string, v Voice, speed, pitch int, path string) error
}

// A WordChecker tells whether a renderer reads a word by the rules of the
// voice's language. [Synthesize] redraws the words it does not.
type WordChecker interface {
	ReadsWord(word, voice string) (bool, error)
}

// languageSwitch matches espeak-ng's mark of a switch to another language's
// rules in its phoneme output ("(en)" before the English words it reads a
// letter it cannot read as: "Japanese letter").
var languageSwitch = regexp.MustCompile(`\([a-z]{2,3}(-[a-z0-9-]+)?\)`)

// ReadsWord implements WordChecker: `espeak-ng -v VOICE -q -x --stdin` prints
// the word's phonemes with no language switch.
func (e Espeak) ReadsWord(word, voice string) (bool, error) {
	var stderr bytes.Buffer
	cmd := exec.Command(e.binary(), "-v", voice, "-q", "-x", "-b", "1", "--stdin")
	cmd.Stdin = strings.NewReader(word)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return false, fmt.Errorf("%s -v %s -x: %w: %s", e.binary(), voice, err, strings.TrimSpace(stderr.String()))
	}
	return !languageSwitch.Match(out), nil
}

// Espeak renders with the espeak-ng program: `espeak-ng -v VOICE+VARIANT -s
// SPEED -p PITCH -b 1 -w PATH --stdin`, with the text as UTF-8 on its
// standard input.
type Espeak struct {
	Binary string // "espeak-ng" when empty
}

func (e Espeak) binary() string {
	if e.Binary == "" {
		return "espeak-ng"
	}
	return e.Binary
}

// Render implements Renderer.
func (e Espeak) Render(text string, v Voice, speed, pitch int, path string) error {
	var stderr bytes.Buffer
	cmd := exec.Command(e.binary(), "-v", v.Arg(), "-s", strconv.Itoa(speed), "-p", strconv.Itoa(pitch),
		"-b", "1", "-w", path, "--stdin")
	cmd.Stdin = strings.NewReader(text)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s -v %s: %w: %s", e.binary(), v.Arg(), err, strings.TrimSpace(stderr.String()))
	}
	if s := strings.TrimSpace(stderr.String()); s != "" { // e.g. an unknown voice, with exit status 0
		return fmt.Errorf("%s -v %s: %s", e.binary(), v.Arg(), s)
	}
	return nil
}

// Version returns the first line of `espeak-ng --version` without its data
// path, such as "eSpeak NG text-to-speech: 1.51".
func (e Espeak) Version() (string, error) {
	out, err := exec.Command(e.binary(), "--version").Output()
	if err != nil {
		return "", fmt.Errorf("%s --version: %w", e.binary(), err)
	}
	line, _, _ := strings.Cut(string(out), "\n")
	line, _, _ = strings.Cut(line, "Data at:")
	return strings.TrimSpace(line), nil
}

// SynthInfo is the metadata of a synthetic corpus, in SYNTHETIC.json.
type SynthInfo struct {
	Note      string            `json:"note"` // StandInNote
	Renderer  string            `json:"renderer"`
	Options   SynthOptions      `json:"options"`
	Languages []SynthLanguage   `json:"languages"`
	Missing   []MissingLanguage `json:"missing"`
}

// SynthLanguage is one rendered language of a synthetic corpus.
type SynthLanguage struct {
	Name     string     `json:"name"`
	Label    int        `json:"label"`
	Voice    string     `json:"voice"`
	Words    WordSource `json:"words"`
	NumWords int        `json:"num_words"` // distinct words after the filter
	// RejectedWords are the words drawn that the renderer does not read by
	// the language's rules (WordChecker), redrawn.
	RejectedWords int                 `json:"rejected_words"`
	Voices        map[string][]string `json:"voices"` // split -> client ids
	Utterances    map[string]int      `json:"utterances"`
}

// MissingLanguage is a CommonLanguage language the corpus lacks, and why.
type MissingLanguage struct {
	Name   string `json:"name"`
	Label  int    `json:"label"`
	Reason string `json:"reason"`
}

// ReadSynthInfo reads the metadata of a synthetic corpus; it returns nil
// and no error when root has none, as CommonLanguage itself has none.
func ReadSynthInfo(root string) (*SynthInfo, error) {
	data, err := os.ReadFile(filepath.Join(root, synthMetadataFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lid: %w", err)
	}
	var info SynthInfo
	if err := json.Unmarshal(data, &info); err != nil {
		return nil, fmt.Errorf("lid: %s: %w", filepath.Join(root, synthMetadataFile), err)
	}
	return &info, nil
}

// splitVoices assigns a language's voices to the splits, none shared: the
// male and the female variants are shuffled apart; dev gets the first of
// each, test the second, train the rest (5 male, 3 female).
func splitVoices(lang string, rng *rand.Rand) map[string][]Voice {
	m := append([]string(nil), maleVariants...)
	f := append([]string(nil), femaleVariants...)
	rng.Shuffle(len(m), func(i, j int) { m[i], m[j] = m[j], m[i] })
	rng.Shuffle(len(f), func(i, j int) { f[i], f[j] = f[j], f[i] })
	v := func(variants ...string) []Voice {
		out := make([]Voice, len(variants))
		for i, x := range variants {
			out[i] = Voice{Language: lang, Variant: x}
		}
		return out
	}
	return map[string][]Voice{
		"dev":   v(m[0], f[0]),
		"test":  v(m[1], f[1]),
		"train": v(interleave(m[2:], f[2:])...),
	}
}

// interleave alternates a and b, then appends what is left of the longer.
func interleave(a, b []string) []string {
	var out []string
	for i := 0; i < max(len(a), len(b)); i++ {
		if i < len(a) {
			out = append(out, a[i])
		}
		if i < len(b) {
			out = append(out, b[i])
		}
	}
	return out
}

// minVocabulary is the fewest distinct words a language needs.
const minVocabulary = 50

// maxSentenceDraws bounds the draws of a sentence not used before, and
// maxWordDraws those of a word the renderer reads.
const (
	maxSentenceDraws = 1000
	maxWordDraws     = 1000
)

type plannedUtterance struct {
	language, split string
	row             Row
	voice           Voice
	speed, pitch    int
}

// Synthesize writes a synthetic stand-in corpus in the CommonLanguage
// layout under root, which must not exist or be empty; [Load] reads it.
//
// Each language has its random stream, seeded by Seed and its label, so a
// language's utterances do not depend on which others are rendered. Its
// voices are split by splitVoices. Every utterance gets a new sentence of
// MinWords to MaxWords words drawn from the language's word list, the
// split's next voice in turn, a speed and a pitch. No sentence repeats
// within a language, so none is shared between splits. The renderer's file
// is converted to 16 kHz mono by [audio.Load] and written as 16-bit PCM by
// [audio.WriteWAV].
//
// Every word list is read, and the options checked, before any file is
// written. words reads a WordSource, as [ReadWords] does; p receives one
// event per utterance, stage "lid corpus". The metadata file
// SYNTHETIC.json and a README saying that the corpus is a stand-in are
// written last, after the CSVs, which follow all the audio. A run that
// fails while rendering leaves audio but no CSV, so Load finds no language,
// and no metadata; remove the folder before running again.
func Synthesize(root string, o SynthOptions, r Renderer, rendererName string, words func(WordSource) ([]string, error), p progress.Func) (*SynthInfo, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	langs := o.Languages
	if langs == nil {
		langs = standInLanguages()
	}
	if err := checkEmptyRoot(root); err != nil {
		return nil, err
	}
	info := &SynthInfo{Note: StandInNote, Renderer: rendererName, Options: o}
	lists, err := readWordLists(langs, words)
	if err != nil {
		return nil, err
	}
	plan, err := planCorpus(info, lists, o, r)
	if err != nil {
		return nil, err
	}
	rows, err := renderPlan(root, plan, r, p)
	if err != nil {
		return nil, err
	}
	if err := writeCorpusFiles(root, info, rows); err != nil {
		return nil, err
	}
	return info, nil
}

// checkEmptyRoot checks that root does not exist or is an empty folder.
func checkEmptyRoot(root string) error {
	if entries, err := os.ReadDir(root); err == nil && len(entries) > 0 {
		return fmt.Errorf("lid: synthetic corpus %s: the folder is not empty", root)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("lid: synthetic corpus: %w", err)
	}
	return nil
}

// readWordLists reads the word list of each language of langs, in that
// order; each must have at least minVocabulary words.
func readWordLists(langs []string, words func(WordSource) ([]string, error)) (map[string][]string, error) {
	lists := map[string][]string{}
	for _, l := range langs {
		_, src, _, _ := standInVoice(l)
		w, err := words(src)
		if err != nil {
			return nil, fmt.Errorf("lid: %s (Debian package %s): %w", l, src.Package, err)
		}
		if len(w) < minVocabulary {
			return nil, fmt.Errorf("lid: %s: %d distinct words in %s, want >= %d", l, len(w), strings.Join(src.Paths, ", "), minVocabulary)
		}
		lists[l] = w
	}
	return lists, nil
}

// planCorpus plans the utterances of every language with a word list, in
// label order whatever the order of o.Languages, adding each to info's
// languages; the others are added to info's missing languages.
func planCorpus(info *SynthInfo, lists map[string][]string, o SynthOptions, r Renderer) ([]plannedUtterance, error) {
	var plan []plannedUtterance
	for _, l := range languages { // label order, whatever the order of o.Languages
		if lists[l] == nil {
			label, _ := LanguageIndex(l)
			_, _, why, ok := standInVoice(l)
			if ok {
				why = "not selected (option languages)"
			}
			info.Missing = append(info.Missing, MissingLanguage{Name: l, Label: label, Reason: why})
			continue
		}
		li, lp, err := planLanguage(l, lists[l], o, r)
		if err != nil {
			return nil, err
		}
		plan = append(plan, lp...)
		info.Languages = append(info.Languages, li)
	}
	return plan, nil
}

// planLanguage plans the utterances of language l (word list w), from its
// own random stream: per split, its voices in turn, a new sentence, a speed
// and a pitch.
func planLanguage(l string, w []string, o SynthOptions, r Renderer) (SynthLanguage, []plannedUtterance, error) {
	label, _ := LanguageIndex(l)
	voice, src, _, _ := standInVoice(l)
	rng := rand.New(rand.NewPCG(o.Seed, uint64(label)))
	voices := splitVoices(voice, rng)
	li := SynthLanguage{Name: l, Label: label, Voice: voice, Words: src, NumWords: len(w),
		Voices: map[string][]string{}, Utterances: map[string]int{}}
	used := map[string]bool{}
	vb := &vocabulary{words: w, voice: voice, reads: map[string]bool{}}
	if c, ok := r.(WordChecker); ok {
		vb.checker = c
	}
	var plan []plannedUtterance
	for _, split := range splits {
		for _, vc := range voices[split] {
			li.Voices[split] = append(li.Voices[split], vc.ClientID())
		}
		for i := 0; i < o.perSplit(split); i++ {
			s, err := newSentence(vb, o, rng, used)
			if err != nil {
				return SynthLanguage{}, nil, fmt.Errorf("lid: %s: %w", l, err)
			}
			v := voices[split][i%len(voices[split])] // the split's voices in turn
			u := plannedUtterance{language: l, split: split, voice: v,
				speed: o.MinSpeed + rng.IntN(o.MaxSpeed-o.MinSpeed+1),
				pitch: o.MinPitch + rng.IntN(o.MaxPitch-o.MinPitch+1),
				row: Row{ClientID: v.ClientID(), Path: fmt.Sprintf("%s_%s_%05d.wav", l, split, i),
					Sentence: s, Gender: v.Gender()}}
			plan = append(plan, u)
		}
		li.Utterances[split] = o.perSplit(split)
	}
	li.RejectedWords = vb.rejected()
	return li, plan, nil
}

// renderPlan creates root and renders the planned utterances in order
// (through a temporary folder under root, removed after), reporting each to
// p; it returns the rows of each (language, split).
func renderPlan(root string, plan []plannedUtterance, r Renderer, p progress.Func) (map[[2]string][]Row, error) {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("lid: synthetic corpus: %w", err)
	}
	tmp, err := os.MkdirTemp(root, ".render-")
	if err != nil {
		return nil, fmt.Errorf("lid: synthetic corpus: %w", err)
	}
	defer os.RemoveAll(tmp)
	count := p.Counter("lid corpus", "utterances", int64(len(plan)))
	rows := map[[2]string][]Row{}
	for i, u := range plan {
		if err := renderOne(root, tmp, u, r); err != nil {
			return nil, err
		}
		key := [2]string{u.language, u.split}
		rows[key] = append(rows[key], u.row)
		count(int64(i + 1))
	}
	return rows, nil
}

// writeCorpusFiles writes the CSVs of every language and split, then the
// metadata, then the README.
func writeCorpusFiles(root string, info *SynthInfo, rows map[[2]string][]Row) error {
	for _, li := range info.Languages {
		for _, split := range splits {
			data, err := EncodeCSV(rows[[2]string{li.Name, split}])
			if err != nil {
				return err
			}
			if err := atomicfile.WriteBytes(CSVPath(root, li.Name, split), data); err != nil {
				return fmt.Errorf("lid: %w", err)
			}
		}
	}
	if err := atomicfile.WriteJSON(filepath.Join(root, synthMetadataFile), info); err != nil {
		return fmt.Errorf("lid: %w", err)
	}
	if err := atomicfile.WriteBytes(filepath.Join(root, "README.md"), []byte(readme(info))); err != nil {
		return fmt.Errorf("lid: %w", err)
	}
	return nil
}

// vocabulary is a language's word list with the words checked so far.
type vocabulary struct {
	words   []string
	voice   string
	checker WordChecker // nil: every word is read
	reads   map[string]bool
}

// word draws a word the checker accepts.
func (v *vocabulary) word(rng *rand.Rand) (string, error) {
	for range maxWordDraws {
		w := v.words[rng.IntN(len(v.words))]
		if v.checker == nil {
			return w, nil
		}
		ok, seen := v.reads[w]
		if !seen {
			var err error
			if ok, err = v.checker.ReadsWord(w, v.voice); err != nil {
				return "", err
			}
			v.reads[w] = ok
		}
		if ok {
			return w, nil
		}
	}
	return "", fmt.Errorf("voice %s reads none of %d words drawn from %d by its own rules", v.voice, maxWordDraws, len(v.words))
}

// rejected counts the words checked and refused.
func (v *vocabulary) rejected() int {
	n := 0
	for _, ok := range v.reads {
		if !ok {
			n++
		}
	}
	return n
}

// newSentence draws a sentence not in used (and adds it).
func newSentence(v *vocabulary, o SynthOptions, rng *rand.Rand, used map[string]bool) (string, error) {
	for range maxSentenceDraws {
		w := make([]string, o.MinWords+rng.IntN(o.MaxWords-o.MinWords+1))
		for i := range w {
			var err error
			if w[i], err = v.word(rng); err != nil {
				return "", err
			}
		}
		s := strings.Join(w, " ")
		if !used[s] {
			used[s] = true
			return s, nil
		}
	}
	return "", fmt.Errorf("no new sentence in %d draws from %d words: ask for fewer utterances or longer sentences", maxSentenceDraws, len(v.words))
}

// renderOne renders an utterance to a scratch file in tmp and writes it as
// 16 kHz mono 16-bit PCM at its place in the layout.
func renderOne(root, tmp string, u plannedUtterance, r Renderer) error {
	scratch := filepath.Join(tmp, "utterance.wav")
	if err := r.Render(u.row.Sentence, u.voice, u.speed, u.pitch, scratch); err != nil {
		return fmt.Errorf("lid: %s %s %s: %w", u.language, u.split, u.row.Path, err)
	}
	x, err := audio.Load(scratch)
	if err != nil {
		return fmt.Errorf("lid: %s %s %s: rendered audio: %w", u.language, u.split, u.row.Path, err)
	}
	silent := true
	for _, v := range x {
		if v != 0 {
			silent = false
			break
		}
	}
	if silent {
		return fmt.Errorf("lid: %s %s %s: the renderer returned silence for %q with voice %s", u.language, u.split, u.row.Path, u.row.Sentence, u.voice.Arg())
	}
	out := AudioPath(root, u.language, u.split, u.row)
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return fmt.Errorf("lid: %w", err)
	}
	return audio.WriteWAV(out, x, audio.SampleRate)
}

// readme is the README.md of a synthetic corpus.
func readme(info *SynthInfo) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Synthetic language-identification corpus (NOT CommonLanguage)\n\n%s\n\n", info.Note)
	fmt.Fprintf(&b, "Rendered by %s; options and per-language voices in %s. Layout: "+
		"`<Language>/<split>.csv` (UTF-16, tab-separated) and `<Language>/<split>/<client_id>/<file>.wav` "+
		"(16 kHz mono 16-bit PCM). No sentence and no voice is shared between train, dev and test.\n\n",
		info.Renderer, synthMetadataFile)
	b.WriteString("| label | language | espeak-ng voice | word list (Debian package) | words | train / dev / test |\n|---|---|---|---|---|---|\n")
	for _, l := range info.Languages {
		fmt.Fprintf(&b, "| %d | %s | %s | %s (%s) | %d | %d / %d / %d |\n", l.Label, l.Name, l.Voice, l.Words.Kind,
			l.Words.Package, l.NumWords, l.Utterances["train"], l.Utterances["dev"], l.Utterances["test"])
	}
	b.WriteString("\nNot rendered:\n\n")
	for _, m := range info.Missing {
		fmt.Fprintf(&b, "- %s (label %d): %s\n", m.Name, m.Label, m.Reason)
	}
	return b.String()
}

// NumUtterances is the number of utterances of the corpus, over every
// language and split.
func (s *SynthInfo) NumUtterances() int {
	n := 0
	for _, l := range s.Languages {
		for _, c := range l.Utterances {
			n += c
		}
	}
	return n
}
